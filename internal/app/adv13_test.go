package app

// Adversarial tests of the thirteenth round (2026-12-05): each drives
// llmguard through real loopback sockets.

import "testing"

// A Responses, legacy completions or Messages body's top-level member
// its API does not define weighed nothing (chat's were weighed since
// TestAdv12UnknownTopLevelChatMembersAreWeighed), but LiteLLM passes
// such a member to the provider as one of its own parameters, where an
// Anthropic "system", a Cohere "chat_history" or a Gemini
// "system_instruction" is billed: 3,000 words there went seven times
// through a 20,000-token bucket. Each is now weighed by its key and
// value text.
func TestAdv13UnknownTopLevelMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["input"], body["prompt"], body["messages"], body["system"], body["chat_history"],
			body["system_instruction"], body["preamble"]), 1
	})
	W := `"` + words16 + `"`
	for _, tc := range []struct{ name, path, body string }{
		{"responses system", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"system":` + W + `,"input":"hi"}`},
		{"responses chat_history after input", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"role":"user","content":"hi"}],"chat_history":[{"role":"USER","message":` + W + `}]}`},
		{"responses system_instruction", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"system_instruction":{"parts":[{"text":` + W + `}]},"input":"hi"}`},
		{"completions system", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"system":` + W + `,"prompt":"hi"}`},
		{"completions preamble after prompt", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","preamble":` + W + `}`},
		{"messages chat_history", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"chat_history":[{"role":"USER","message":` + W + `}],"messages":[{"role":"user","content":"hi"}]}`},
		{"messages system_instruction after messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"system_instruction":{"parts":[{"text":` + W + `}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, up.url, "user-tpd", 20000)
			} else {
				h = fresh16(t, up.url)
			}
			if passed := up.callThrough(t, h, tc.path, tc.body, 10, 20000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
