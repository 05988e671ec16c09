package app

import (
	"strings"
	"testing"
)

// A request that names no output maximum and is refused is told that the
// amount requested holds the model's default output reservation, which it
// did not write, and which field bounds it (trial7: a legacy completions
// call of a 2-token prompt read "requested 514 tokens … lower max_tokens",
// a field it never sent). gpt-4o-mini reserves 256 tokens by default in the
// harness config; the clock is frozen, so nothing refills.
func TestDeniedDefaultOutputIsNamed(t *testing.T) {
	bearer := []string{"Authorization", "Bearer " + testKey}
	const said = "sets no max_tokens, so llmguard reserved the model's default output"

	// Too large: 2 + 256 tokens cannot fit a 200-token bucket.
	h := startFrozen(t, userTokensLimit("user-tokens", 200))
	resp, b := h.raw("/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi"}`, bearer...)
	_, msg := errorCode(t, "/v1/completions", b)
	if resp.StatusCode != 429 || !strings.Contains(msg, "Request too large") || !strings.Contains(msg, said) ||
		!strings.Contains(msg, "default_max_output_tokens") || !strings.Contains(msg, "set max_tokens to the output you need") {
		t.Errorf("completions without max_tokens, too large: %d %q, want a 429 naming the default output reservation", resp.StatusCode, msg)
	}
	resp, b = h.raw("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, bearer...)
	if _, msg := errorCode(t, "/v1/chat/completions", b); resp.StatusCode != 429 ||
		!strings.Contains(msg, "sets no max_completion_tokens or max_tokens, so llmguard reserved the model's default output") {
		t.Errorf("chat without a maximum, too large: %d %q, want a 429 naming the default output reservation", resp.StatusCode, msg)
	}
	// A maximum the caller wrote keeps the old advice.
	resp, b = h.raw("/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi","max_tokens":500}`, bearer...)
	if _, msg := errorCode(t, "/v1/completions", b); resp.StatusCode != 429 || strings.Contains(msg, "sets no") ||
		!strings.Contains(msg, "reduce the request: lower max_tokens, or shorten the prompt.") {
		t.Errorf("completions with max_tokens 500, too large: %d %q, want the advice to lower max_tokens", resp.StatusCode, msg)
	}

	// Denied for now: 200 tokens of a 400-token bucket used, 258 asked.
	h = startFrozen(t, userTokensLimit("user-tokens", 400))
	resp, b = h.raw("/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi","max_tokens":198}`, append(bearer, "x-mock-completion-tokens", "198")...)
	if resp.StatusCode != 200 {
		t.Fatalf("first call: %d %.300s", resp.StatusCode, b)
	}
	resp, b = h.raw("/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi"}`, bearer...)
	_, msg = errorCode(t, "/v1/completions", b)
	if resp.StatusCode != 429 || !strings.Contains(msg, "Rate limit reached") || !strings.Contains(msg, "This request "+said) ||
		!strings.Contains(msg, "set max_tokens to the output you need to reserve less.") {
		t.Errorf("completions without max_tokens, denied: %d %q, want a 429 naming the default output reservation", resp.StatusCode, msg)
	}
	resp, b = h.raw("/v1/completions", `{"model":"gpt-4o-mini","prompt":"Say hi","max_tokens":250}`, bearer...)
	if _, msg := errorCode(t, "/v1/completions", b); resp.StatusCode != 429 || strings.Contains(msg, "sets no") {
		t.Errorf("completions with max_tokens 250, denied: %d %q, want a 429 without the default reservation's sentence", resp.StatusCode, msg)
	}
}
