package app

// Adversarial tests of adv26 (2026-12-06). Each drives llmguard through
// loopback sockets to an upstream that answers in a lenient server's own
// way, and fails where llmguard charged less than the answer shows.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAdv26ChatAnswerReasoningIsCounted: a non-streamed chat answer's
// message.reasoning (vLLM's reasoning parsers since reasoning_content was
// renamed; OpenRouter's chat answer) is output the upstream generated
// and bills. The stream's delta.reasoning was counted, the JSON answer's
// was not: an answer without usage (or reporting 0 or 5 output tokens)
// that reasoned 3,000 words and answered "ok" was charged the 256-token
// default reservation (or 0, or 5), where its text floor should have
// charged the 3,000 words.
func TestAdv26ChatAnswerReasoningIsCounted(t *testing.T) {
	for _, tc := range []struct{ name, usage string }{
		{"no usage", ``},
		{"zero output", `,"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}`},
		{"small output", `,"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","reasoning":%q,"content":"ok"},"finish_reason":"stop"}]%s}`, words16, tc.usage)
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"think"}]}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			out := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
			if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
				t.Fatal("not settled")
			}
			if got := out(); got < 3000 {
				t.Errorf("charged %v output tokens for an answer that reasoned 3,000 words", got)
			}
		})
	}
}
