package app

import (
	"net/http"
	"strings"
	"testing"
)

// A body with LiteLLM's "prompt_id" has its stored prompt fetched by the
// gateway, whose template becomes the messages and whose model and
// parameters replace the request's: input, model and output maximum
// llmguard never saw. It went through, priced as the body's model on the
// body's text; it is refused as a model outside the body.
func TestPromptIDIsRefused(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 1, 1 })
	h := fresh16(t, up.url)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"prompt_id":"p","prompt_variables":{"x":"y"}}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[],"prompt_id":"p"}`},
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","Prompt_ID":"p"}`},
	} {
		resp, b := h.do(tc.path, tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"model_outside_body"`) {
			t.Errorf("POST %s: %d %.200s, want 400 model_outside_body", tc.path, resp.StatusCode, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times, want none", n)
	}
}
