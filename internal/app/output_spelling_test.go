package app

import "testing"

// An output limit given as a string Python's int() reads and Go's
// ParseFloat did not — digits of another script ("１５０００",
// fullwidth), underscores between digits ("15_000"), a number past
// float64's range ("1e400") — reserved the model's default output (2,048
// tokens) while a lenient upstream (a Python OpenAI-compatible server)
// wrote up to the limit it read: two calls of 15,000 output tokens each
// went through a 20,000-token bucket, billed 30,016. It is reserved at
// the number Python reads.
func TestOutputLimitSpelledAsPythonReadsIt(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 8, 15000 })
	for _, tc := range []struct{ name, path, body string }{
		{"chat fullwidth max_tokens", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":"１５０００","messages":[{"role":"user","content":"hi"}]}`},
		{"chat max_completion_tokens underscores", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_completion_tokens":"15_000","messages":[{"role":"user","content":"hi"}]}`},
		{"chat max_tokens 1e400", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":"1e400","messages":[{"role":"user","content":"hi"}]}`},
		{"responses arabic-indic max_output_tokens", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":"١٥٠٠٠","input":"hi"}`},
		{"messages fullwidth max_tokens", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":"１５０００","messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startConfig(t, nil, twoFlavorConfig(up.url, "user-tpd", 20000))
			left := h.tokensLeft()
			before := up.billed.Load()
			for range 4 {
				h.do(tc.path, tc.body) // 200, 429, or refused as past the bucket (1e400)
			}
			if billed := up.billed.Load() - before; billed > left {
				t.Errorf("the upstream billed %d tokens through a bucket holding %d", billed, left)
			}
		})
	}
}
