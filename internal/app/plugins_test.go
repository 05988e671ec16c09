package app

import (
	"net/http"
	"testing"
)

// OpenRouter's plugins (web search, file parsing) and its ":online" model
// suffix put search results into the prompt it bills, on its completions
// and Anthropic-compatible Messages endpoints as on chat: hidden context,
// reserved at the model's largest input (200,000 tokens here), which a
// 20,000-token bucket refuses. Chat and Responses reserved so already;
// completions and Messages weighed the body's text alone and went through.
func TestPluginsAreHiddenContext(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 1, 1 })
	h := startConfig(t, nil, twoFlavorConfig(up.url, "user-tpd", 20000))
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","plugins":[{"id":"web"}]}`},
		{"/v1/completions", `{"model":"gpt-4o-mini:online","max_tokens":1,"prompt":"hi"}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"plugins":[{"id":"web"}]}`},
	} {
		if resp, b := h.do(tc.path, tc.body); resp.StatusCode == http.StatusOK {
			t.Errorf("POST %s %s: 200 %.200s, want it refused (its reservation is past the bucket)", tc.path, tc.body, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times, want none", n)
	}
	// Without them: forwarded.
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi"}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		if resp, b := h.do(tc.path, tc.body); resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s without plugins: %d %.200s, want 200", tc.path, resp.StatusCode, b)
		}
	}
}
