package app

import (
	"net/http"
	"strings"
	"testing"
)

// A body whose extra_body holds members a gateway merges over the
// top-level ones (LiteLLM's proxy) is refused with 400 extra_body, naming
// the member and saying to send it at the top level, and reserves
// nothing; Gemini's extra_body.google passes.
func TestExtraBodyRefusedEndToEnd(t *testing.T) {
	h := startFlavors(t, "")
	before := h.tokensLeft()
	resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":10,"extra_body":{"max_tokens":100000,"n":8},"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"extra_body"`) || !strings.Contains(b, "extra_body.max_tokens") || !strings.Contains(b, "top level") {
		t.Errorf("extra_body max_tokens: %d %.300s, want 400 extra_body naming the member", resp.StatusCode, b)
	}
	if after := h.tokensLeft(); after != before {
		t.Errorf("tokens left %d → %d: a refused body reserved", before, after)
	}
	if resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":10,"extra_body":{"google":{"thinking_config":{"thinking_budget":0}}},"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != http.StatusOK {
		t.Errorf("extra_body.google: %d %.200s, want 200", resp.StatusCode, b)
	}
}
