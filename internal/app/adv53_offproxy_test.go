package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// rawRequest writes one request line of method and target (sent as is,
// byte for byte: no client cleans or re-encodes it) with body and the
// test key to h's proxy socket, and returns the status and body read.
func (h *harness) rawRequest(method, target, body string) (int, string) {
	h.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, testKey, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// adv53: every spelling of a Realtime key or session call, through a raw
// socket (no client cleans the request line), under request limits only:
// each is refused (403) or rejected as malformed (400), never forwarded.
// Azure OpenAI's preview ephemeral-key path /openai/realtimeapi/sessions,
// its WebRTC path /v1/realtimertc, an upstream API root other than /v1
// (/api/v1/realtime/…) and a segment a lenient server trims
// ("realtime.", "realtime ") were forwarded before: OffProxy matched
// only a first segment of exactly "realtime". Other unmetered POSTs, and
// a deployment named realtime-…, still pass such a caller.
func TestAdv53OffProxySpellings(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	requestsOnly := `limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m}
`
	h := startConfig(t, mock, baseConfig(t, mock.URL, requestsOnly))
	body := `{"session":{"type":"realtime","model":"gpt-realtime"}}`
	paths := []string{"/v1/realtime/client_secrets;x", "/v1/realtime;x/client_secrets", "/v1/%72ealtime/client_secrets",
		"/v1/realtime%2Fclient_secrets", "/openai/deployments/d/realtime/sessions", "/v1/x/../realtime/client_secrets",
		"/v1/realtime\\calls", "//v1/realtime/calls", "/v1/REALTIME/CALLS", "http://x/v1/realtime/calls",
		// Forwarded before adv53:
		"/openai/realtimeapi/sessions?api-version=2025-04-01-preview", "/v1/realtimertc", "/v1/realtime%20/calls",
		"/v1/realtime./calls", "/api/v1/realtime/client_secrets", "/v1/Realtime%2E/calls"}
	for _, m := range []string{"POST", "PUT", "PATCH", "post", "PROPFIND"} {
		for _, p := range paths {
			before := lastUpstreamURI(h)
			code, b := h.rawRequest(m, p, body)
			if after := lastUpstreamURI(h); after != before {
				t.Errorf("%s %s under request limits only: forwarded as %s (%d %.80s)", m, p, after, code, b)
			} else if code != http.StatusForbidden && code != http.StatusBadRequest {
				t.Errorf("%s %s under request limits only: %d %.80s, want 403 or 400", m, p, code, b)
			}
		}
	}
	if code, b := h.rawRequest("POST", "/v1/images/edits", `{"model":"dall-e-2","prompt":"x"}`); code == http.StatusForbidden || lastUpstreamURI(h) != "/v1/images/edits" {
		t.Errorf("POST /v1/images/edits under request limits only: %d %.80s, upstream saw %q; want it forwarded", code, b, lastUpstreamURI(h))
	}
}

// The same through an Azure upstream, whose dialect maps
// /openai/realtimeapi/sessions to /v1/realtimeapi/sessions: Azure's
// preview ephemeral key is refused to a caller under request limits only.
func TestAdv53OffProxyAzurePreview(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: aoai, flavor: azure, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m}
`, mock.URL, testKey))
	for _, p := range []string{"/openai/realtimeapi/sessions?api-version=2025-04-01-preview", "/openai/v1/realtime/client_secrets",
		"/openai/realtime?api-version=2024-10-01-preview&deployment=gpt-4o-realtime-preview", "/OpenAI/RealtimeAPI/Sessions"} {
		before := lastUpstreamURI(h)
		code, b := h.rawRequest("POST", p, `{"model":"gpt-4o-realtime-preview"}`)
		if after := lastUpstreamURI(h); after != before || code != http.StatusForbidden {
			t.Errorf("POST %s to Azure under request limits only: %d %.80s, upstream saw %q; want 403, not forwarded", p, code, b, after)
		}
	}
	// A deployment's name is not the call: realtime-prod's speech passes.
	p := "/openai/deployments/realtime-prod/audio/speech?api-version=2025-04-01-preview"
	if code, b := h.rawRequest("POST", p, `{"model":"tts-1","input":"x","voice":"alloy"}`); code == http.StatusForbidden || lastUpstreamURI(h) == "" {
		t.Errorf("POST %s to Azure under request limits only: %d %.80s, upstream saw %q; want it forwarded", p, code, b, lastUpstreamURI(h))
	}
}
