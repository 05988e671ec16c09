package app

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A stream without a usage is charged the output it streamed, counted
// locally; a model streams one token or more an event, so each event
// that carried text is at least one token, however the concatenated text
// tokenizes again. An upstream (or a caller's prompt) that streams "a"
// 3,000 times in 3,000 chunks generated, and bills, 3,000 tokens; the
// text "aaa…" counts some 375: ten such streams went through a
// 20,000-token bucket, billed 30,000. Each is charged 3,000 output tokens.
func TestStreamChargedAtLeastATokenAnEvent(t *testing.T) {
	const chunk = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"
	const finish = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n"
	up := rawStreamUpstream(t, map[string]string{
		"a": "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(strings.Repeat(chunk, 3000)+finish),
	})
	h := startConfig(t, nil, twoFlavorConfig(up, "user-tpd", 20000))
	settled := func() float64 {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"})
	}
	passed := 0
	for range 10 {
		in0 := settled()
		r, body := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":"say a"}]}`, "x-case", "a")
		if r.StatusCode == http.StatusTooManyRequests {
			continue
		}
		if r.StatusCode != http.StatusOK || !strings.Contains(body, "[DONE]") {
			t.Fatalf("status %d %.200s, want the stream", r.StatusCode, body)
		}
		passed++
		// The bound only ends a failing run.
		if !waitFor(30*time.Second, func() bool { return settled() > in0 }) {
			t.Fatalf("not settled")
		}
	}
	if billed := passed * 3000; billed > 20000 {
		t.Errorf("%d of 10 streams of 3,000 one-token events passed: billed %d tokens through a 20,000-token bucket", passed, billed)
	}
}
