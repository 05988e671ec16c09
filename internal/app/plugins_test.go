package app

import (
	"fmt"
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
	h := startConfig(t, nil, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15}
limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`, up.url, testKey))
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
