package app

import "testing"

// A legacy completions body naming no max_tokens reserved OpenAI's
// default of 16 output tokens, but llama.cpp's server and Ollama generate
// until the model stops or the context ends: 200-token answers, each
// reserved as 16, went through the 20,000-token bucket until it had less
// than 16 left, the last one billed past it. The model's output
// reservation (256 here, as for a chat body with no maximum) is reserved
// now, and the bucket holds.
func TestCompletionsWithoutMaxReserveTheModelsDefault(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		out := int64(200) // the model stopped on its own: no cap was given
		if m, ok := body["max_tokens"].(float64); ok {
			out = min(out, int64(m))
		}
		return words(body["prompt"]), out
	})
	h := fresh16(t, up.url)
	passed := up.callThrough(t, h, "/v1/completions", `{"model":"gpt-4o-mini","prompt":"write"}`, 110, h.tokensLeft())
	if passed < 90 {
		t.Errorf("%d of 110 calls passed, want about 20,000 / 201", passed)
	}
}
