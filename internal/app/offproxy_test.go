package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// A Realtime client secret, session or WebRTC call hands the caller a key
// or session it then uses with the provider directly, where no limit of
// llmguard's counts (adv52's finding): it is refused to every caller, a
// caller under request limits only included, and never forwarded, unless
// unmetered_paths allows it. Other unmetered endpoints still pass such a
// caller as one request.
func TestOffProxyEndpointsRefusedToEveryCaller(t *testing.T) {
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
	before := lastUpstreamURI(h)
	for _, p := range []string{"/v1/realtime/client_secrets", "/v1/realtime/sessions", "/v1/realtime/transcription_sessions",
		"/v1/realtime/calls", "/V1//Realtime/Client_Secrets/", "/openai/v1/realtime/client_secrets", "/v1/realtime"} {
		resp, b := h.do(p, body)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(b, `"code":"unmetered_endpoint"`) || !strings.Contains(b, "directly") {
			t.Errorf("POST %s under request limits only: %d %s, want 403 unmetered_endpoint", p, resp.StatusCode, b)
		}
	}
	if got := lastUpstreamURI(h); got != before {
		t.Errorf("a Realtime key or session was asked upstream: %s", got)
	}
	// Other unmetered endpoints pass a caller under request limits only.
	if resp, b := h.do("/v1/images/edits", `{"model":"dall-e-2","prompt":"x"}`); resp.StatusCode == http.StatusForbidden || lastUpstreamURI(h) != "/v1/images/edits" {
		t.Errorf("POST /v1/images/edits under request limits only: %d %s, upstream saw %q; want it forwarded", resp.StatusCode, b, lastUpstreamURI(h))
	}

	allowed := startConfig(t, mock, baseConfig(t, mock.URL, `unmetered_paths: ["/v1/realtime/*"]
`+requestsOnly))
	if resp, b := allowed.do("/v1/realtime/client_secrets", body); resp.StatusCode == http.StatusForbidden || lastUpstreamURI(allowed) != "/v1/realtime/client_secrets" {
		t.Errorf("POST /v1/realtime/client_secrets allowed by unmetered_paths: %d %s, upstream saw %q", resp.StatusCode, b, lastUpstreamURI(allowed))
	}
}
