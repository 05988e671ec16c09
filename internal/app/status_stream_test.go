package app

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A stream answered under a 3xx, 4xx or 5xx status that carried the
// model's output and was cut off before its terminal event (a gateway
// relaying a provider's stream under its own status, a status rewritten
// on the way) was generated, and billed, as under 200: the provider may
// have written far more than the stream showed (a reasoning model's
// unseen reasoning). Each such stream is charged, as a 2xx one is, its
// input and at least its output reservation. Before, it was charged the
// few words it showed: an upstream that generated all 4,000 reserved
// tokens behind each of ten such streams billed some 40,000 tokens
// through a 20,000-token bucket.
func TestCutStreamUnderErrorStatusKeepsTheOutputReservation(t *testing.T) {
	const (
		role  = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
		words = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}]}` + "\n\n"
		msgs  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n"
		chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":4000,"stream":true}`
		msg  = `{"model":"claude-sonnet-4-5","max_tokens":4000,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	)
	answer := func(status string, body string) string {
		return "HTTP/1.1 " + status + "\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body)
	}
	up := rawStreamUpstream(t, map[string]string{
		"302":          answer("302 Found", role+words),
		"400":          answer("400 Bad Request", role+words),
		"422":          answer("422 Unprocessable Entity", role+words),
		"500":          answer("500 Internal Server Error", role+words),
		"400-messages": answer("400 Bad Request", msgs),
		"400-error":    answer("400 Bad Request", `data: {"error":{"message":"bad","type":"invalid_request_error"}}`+"\n\n"),
	})
	for _, tc := range []struct{ name, path, body string }{
		{"302", "/v1/chat/completions", chat},
		{"400", "/v1/chat/completions", chat},
		{"422", "/v1/chat/completions", chat},
		{"500", "/v1/chat/completions", chat},
		{"400-messages", "/v1/messages", msg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startConfig(t, nil, twoFlavorConfig(up, "user-tpd", 20000))
			passed := 0
			settled := func() float64 {
				return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"})
			}
			for range 10 {
				in0 := settled()
				r, body := h.do(tc.path, tc.body, "x-case", tc.name)
				if r.StatusCode == http.StatusTooManyRequests {
					continue
				}
				if !strings.Contains(body, "Hello there") {
					t.Fatalf("status %d %.200s, want the stream relayed", r.StatusCode, body)
				}
				passed++
				// The next call is weighed against the settled bucket (the
				// bound only ends a failing run).
				if !waitFor(30*time.Second, func() bool { return settled() > in0 }) {
					t.Fatalf("not settled")
				}
			}
			// Each stream passed billed its 4,000 output tokens and some
			// input (a few tokens).
			if billed := int64(passed) * 4010; billed > 20000 {
				t.Errorf("%d of 10 streams passed: the upstream billed some %d tokens through a 20,000-token bucket", passed, billed)
			}
			if passed == 0 {
				t.Errorf("no stream passed: the case tests nothing")
			}
		})
	}
	// A stream of an error status that carried no output, an in-band
	// error alone, is refunded as before: the bucket is whole again.
	h := startConfig(t, nil, twoFlavorConfig(up, "user-tpd", 20000))
	full := h.tokensLeft()
	if r, body := h.do("/v1/chat/completions", chat, "x-case", "400-error"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d %.200s, want the upstream's 400", r.StatusCode, body)
	}
	// The bound only ends a failing run.
	if !waitFor(30*time.Second, func() bool { return h.tokensLeft() == full }) {
		t.Errorf("an error event alone under 400: %d tokens left of %d, want all refunded", h.tokensLeft(), full)
	}
}
