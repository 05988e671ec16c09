package app

import (
	"testing"
)

// A chat body's top-level "prompt", which OpenRouter's chat endpoint takes
// in place of "messages" and bills as a user message, weighed as nothing:
// 3,000 words in it went seven times through a 20,000-token bucket,
// billed 21,0xx. It is weighed as the user message it becomes.
func TestChatPromptIsWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["prompt"]), 1
	})
	for _, tc := range []struct{ name, body string }{
		{"prompt alone", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"` + words16 + `"}`},
		{"prompt beside messages", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"prompt":"` + words16 + `"}`},
		{"prompt list", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[],"prompt":["` + words16 + `"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			if passed := up.callThrough(t, h, "/v1/chat/completions", tc.body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
