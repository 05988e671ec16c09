package app

import (
	"net/http"
	"strings"
	"testing"
)

// A body that names fallback models (OpenRouter's "models", the
// "fallbacks" of LiteLLM and of OpenRouter's Messages API) is refused with
// 400 model_outside_body (OpenAI's shape; invalid_request_error in
// Anthropic's, which has no code), naming the member,
// and never reaches the upstream: the upstream may serve and bill the
// fallback (Claude Opus at about 40× gpt-4o-mini), and llmguard prices the
// body's "model" alone.
func TestFallbackModelsRefusedEndToEnd(t *testing.T) {
	h := startFlavors(t, "")
	before := h.tokensLeft()
	cases := []struct{ path, body, shape string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1000,"fallbacks":[{"model":"claude-opus-4-7"}],"messages":[{"role":"user","content":"hi"}]}`, `"code":"model_outside_body"`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","models":["anthropic/claude-opus-4.7"],"messages":[{"role":"user","content":"hi"}]}`, `"code":"model_outside_body"`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100,"fallbacks":[{"model":"claude-opus-4-7"}],"messages":[{"role":"user","content":"hi"}]}`, `"type":"invalid_request_error"`},
	}
	for _, c := range cases {
		resp, b := h.do(c.path, c.body)
		// Anthropic's error shape has a type and a message, no code.
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, c.shape) || !strings.Contains(b, "model fallbacks") {
			t.Errorf("%s %s: %d %.300s, want 400 model_outside_body", c.path, c.body, resp.StatusCode, b)
		}
		if !strings.Contains(b, "fallbacks") && !strings.Contains(b, "models") {
			t.Errorf("%s: message names no field: %s", c.path, b)
		}
	}
	if after := h.tokensLeft(); after != before {
		t.Errorf("tokens left %d → %d: a refused body reserved", before, after)
	}
	if resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != http.StatusOK {
		t.Errorf("control: %d %.200s", resp.StatusCode, b)
	}
}
