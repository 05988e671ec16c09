package app

// Adversarial tests of adv22 (2026-12-05): members of gateways' and
// providers' own that make an upstream bill more than the body's text and
// maximum show. Each drives llmguard through loopback sockets to an
// upstream that bills what it reads, and fails where it billed more than
// the bucket held.

import (
	"net/http"
	"strings"
	"testing"
)

// geminiThinkingBill22 bills a chat call as Gemini's OpenAI-compatible
// endpoint may under a thinking budget: the input's words, the thinking
// budget named in extra_body.google.thinking_config (or a top-level
// "google" object, as an OpenAI client's extra_body sends it) spent in
// full, and the answer's maximum (500 tokens with none) beside it. Gemini's
// thinking guide documents the budget apart from the output maximum ("The
// thinkingBudget parameter guides the model on the number of thinking
// tokens to use"; the model "might overflow or underflow the token
// budget"), and with no max_tokens its maxOutputTokens is the model's own
// (65,536 on 2.5 Pro), so the budget is the caller's word for what it
// will spend.
func geminiThinkingBill22(_ string, body map[string]any) (in, out int64) {
	in, out = words(body["messages"]), count20(body["max_tokens"])
	if out == 0 {
		out = 500
	}
	g, _ := body["google"].(map[string]any)
	if eb, ok := body["extra_body"].(map[string]any); ok {
		g, _ = eb["google"].(map[string]any)
	}
	tc, _ := g["thinking_config"].(map[string]any)
	return in, out + count20(tc["thinking_budget"])
}

// A Gemini thinking budget (extra_body.google.thinking_config.
// thinking_budget) weighed nothing: a chat body with no max_tokens and a
// budget of 24,576 reserved the model's default of 256 output tokens and
// was billed some 25,000, through a 20,000-token bucket; with
// "max_tokens":100 it reserved 100 and was billed 24,676. The budget is
// now reserved beside the maximum, as OpenRouter's reasoning.max_tokens is.
func TestAdv22GeminiThinkingBudgetIsReserved(t *testing.T) {
	up := startBilling16(t, geminiThinkingBill22)
	for _, tc := range []struct{ name, extra string }{
		{"no maximum", `"extra_body":{"google":{"thinking_config":{"thinking_budget":24576,"include_thoughts":true}}}`},
		{"with a maximum", `"max_tokens":100,"extra_body":{"google":{"thinking_config":{"thinking_budget":24576}}}`},
		{"top-level google", `"google":{"thinking_config":{"thinking_budget":24576}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh20(t, up.url, 20000)
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],` + tc.extra + `}`
			throughBucket(t, h, up, "/v1/chat/completions", body, 3)
		})
	}
	t.Run("budget within the bucket", func(t *testing.T) {
		// A budget the bucket can hold passes, and is billed no more than
		// it held.
		h := fresh20(t, up.url, 20000)
		body := `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"extra_body":{"google":{"thinking_config":{"thinking_budget":1024}}}}`
		if passed := throughBucket(t, h, up, "/v1/chat/completions", body, 3); passed == 0 {
			t.Errorf("no call passed: a 1,024-token budget fits a 20,000-token bucket")
		}
	})
}

// OpenRouter's "route": "fallback" lets it serve the call with a fallback
// model of its own choosing when the body names no "models" ("If you
// don't specify models but you do specify route: "fallback", then
// OpenRouter will try to pick the most appropriate fallback model for
// you", its routing schema, @openrouter/schemas), and a route object
// configures its dynamic routing: a model outside "model", priced at the
// model that served ("Requests are priced using the model that was
// ultimately used", model fallbacks guide). It was weighed as a few
// tokens of an unknown member and forwarded; it is now refused as
// "models" is (400 model_outside_body), and never reaches the upstream.
func TestAdv22OpenRouterRouteIsRefused(t *testing.T) {
	up := startBilling16(t, geminiThinkingBill22)
	h := fresh20(t, up.url, 20000)
	for _, c := range []struct{ path, body, shape string }{
		{"/v1/chat/completions", `{"model":"openai/gpt-4o-mini","route":"fallback","messages":[{"role":"user","content":"hi"}]}`, `"code":"model_outside_body"`},
		{"/v1/chat/completions", `{"model":"openai/gpt-4o-mini","Route":{"type":"fallback"},"messages":[{"role":"user","content":"hi"}]}`, `"code":"model_outside_body"`},
		{"/v1/completions", `{"model":"gpt-4o-mini","route":"fallback","prompt":"hi","max_tokens":5}`, `"code":"model_outside_body"`},
		{"/v1/responses", `{"model":"gpt-4o-mini","route":"fallback","input":"hi"}`, `"code":"model_outside_body"`},
	} {
		resp, b := h.do(c.path, c.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, c.shape) || !strings.Contains(strings.ToLower(b), "route") {
			t.Errorf("%s %s: %d %.300s, want 400 model_outside_body naming route", c.path, c.body, resp.StatusCode, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream got %d calls, want none", n)
	}
	// Messages, in Anthropic's error shape.
	resp, b := startFlavors(t, "").do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100,"route":"fallback","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"type":"invalid_request_error"`) || !strings.Contains(b, "route") {
		t.Errorf("messages: %d %.300s, want 400 invalid_request_error naming route", resp.StatusCode, b)
	}
}
