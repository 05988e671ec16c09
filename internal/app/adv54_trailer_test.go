package app

// adv54 (2026-12-07): request fields that arrive in a chunked body's
// trailer, after llmguard read the header section.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// betaUpstream is an Anthropic-compatible upstream that bills a stored
// document at 900,000 input tokens when the call opts into the 1M-context
// beta, in a header field or a trailer field, plain or behind LiteLLM's
// x-pass- prefix, and at 150,000 otherwise
// (the 200,000-token window bounds it); betas records the anthropic-beta
// values it saw, header and trailer joined, one entry a call.
type betaUpstream struct {
	url    string
	billed atomic.Int64
	mu     sync.Mutex
	betas  []string
}

func startBetaUpstream(t *testing.T) *betaUpstream {
	t.Helper()
	u := &betaUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// LiteLLM's pass-through routes forward an x-pass- field with
		// its prefix stripped.
		var betas []string
		for _, name := range []string{"Anthropic-Beta", "X-Pass-Anthropic-Beta"} {
			betas = append(append(betas, r.Header.Values(name)...), r.Trailer.Values(name)...)
		}
		seen := strings.Join(betas, ",")
		in := int64(150_000)
		if strings.Contains(strings.ToLower(seen), "context-1m") {
			in = 900_000
		}
		u.billed.Add(in + 10)
		u.mu.Lock()
		u.betas = append(u.betas, seen)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":%d,"output_tokens":10}}`, in)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String()
	return u
}

// chunked sends body to path through h's proxy socket as a chunked body
// with the test key, head added to the header section and trailer as the
// body's trailer section (each a list of "Name: value\r\n" lines), and
// returns the answer's status.
func (h *harness) chunked(path, head, body, trailer string) int {
	h.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nanthropic-version: 2023-06-01\r\n"+
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n%s\r\n%x\r\n%s\r\n0\r\n%s\r\n",
		path, testKey, head, len(body), body, trailer)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// The 1M-context beta sent in the body's trailer rather than its header
// section: llmguard read the fields before the body (checkPath), so the
// call reserved the model's 200,000-token window, and forwarded the
// trailer's field, with which the upstream read and billed 900,000: two
// calls passed a 1,500,000-token bucket, 1,800,020 tokens billed. The
// trailer's beta now reserves the 1M window, as the header's does, and
// the second call waits. So does one named x-pass-anthropic-beta, which
// LiteLLM's pass-through routes forward as anthropic-beta (below).
func TestAdv54LongContextBetaInTrailerOrPassPrefix(t *testing.T) {
	up := startBetaUpstream(t)
	for _, tc := range []struct{ name, head, trailer string }{
		{name: "unannounced", trailer: "anthropic-beta: context-1m-2025-08-07\r\n"},
		{name: "announced", head: "Trailer: anthropic-beta\r\n", trailer: "Anthropic-Beta: context-1m-2025-08-07\r\n"},
		{name: "beside a header beta", head: "anthropic-beta: files-api-2025-04-14\r\n", trailer: "anthropic-beta: context-1m-2025-08-07\r\n"},
		{name: "x-pass- in the trailer", trailer: "X-Pass-Anthropic-Beta: context-1m-2025-08-07\r\n"},
		{name: "x-pass- in the header section", head: "x-pass-anthropic-beta: context-1m-2025-08-07\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenHarness(t, longContextConfig(t, up.url, 1_500_000))
			before, passed := up.billed.Load(), 0
			for range 3 {
				switch st := h.chunked("/v1/messages", tc.head, longContextBody, tc.trailer); st {
				case http.StatusOK:
					passed++
				case http.StatusTooManyRequests, http.StatusBadRequest:
				default:
					t.Fatalf("status %d", st)
				}
			}
			up.mu.Lock()
			last := up.betas[len(up.betas)-1]
			up.mu.Unlock()
			if passed == 0 || !strings.Contains(last, "context-1m") {
				t.Fatalf("%d calls passed, the upstream's last saw anthropic-beta %q: the trailer tests nothing", passed, last)
			}
			if billed := up.billed.Load() - before; billed > 1_500_000 {
				t.Errorf("the upstream billed %d tokens through a bucket holding 1,500,000 (%d of 3 calls passed)", billed, passed)
			}
		})
	}
}

// LiteLLM's pass-through routes (/anthropic/v1/messages, Vertex AI's,
// Bedrock's) forward a field named x-pass-<name>, in any case, as <name>
// ("x-pass-anthropic-beta: value becomes anthropic-beta: value",
// https://docs.litellm.ai/docs/proxy/forward_client_headers and
// litellm/constants.py PASS_THROUGH_HEADER_PREFIX): llmguard read neither
// the beta nor a routing field under that prefix. A routing field so
// named is refused as the plain one is, before anything is forwarded.
func TestAdv54PassPrefixedRoutingFieldRefused(t *testing.T) {
	up := startBetaUpstream(t)
	h := frozenHarness(t, longContextConfig(t, up.url, 1_500_000))
	for _, head := range []string{
		"x-portkey-config: {\"targets\":[{\"override_params\":{\"model\":\"claude-opus-4-1\"}}]}\r\n",
		"x-pass-x-portkey-config: {\"targets\":[{\"override_params\":{\"model\":\"claude-opus-4-1\"}}]}\r\n",
		"X-PASS-Helicone-Fallbacks: [\"claude-opus-4-1\"]\r\n",
	} {
		before := up.billed.Load()
		if st := h.chunked("/v1/messages", head, longContextBody, ""); st != http.StatusBadRequest || up.billed.Load() != before {
			t.Errorf("%q: status %d, forwarded %v; want 400, nothing forwarded", head, st, up.billed.Load() != before)
		}
	}
}
