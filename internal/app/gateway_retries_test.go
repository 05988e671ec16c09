package app

import (
	"net/http"
	"strings"
	"testing"
)

// A body asking LiteLLM's proxy to retry the call itself ("num_retries",
// "max_retries") has every attempt billed upstream (with a short
// "timeout", the gateway gives up on each while the provider finishes and
// bills it) while llmguard reserves and settles one. It went through; a
// positive count is refused (gateway_retries), 0 passes.
func TestGatewayRetriesAreRefused(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 1, 1 })
	h := fresh16(t, up.url)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"timeout":0.1,"num_retries":50}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi","max_retries":"3"}`},
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","Num_Retries":2}`},
		{"/v1/embeddings", `{"model":"gpt-4o-mini","input":"hi","num_retries":1}`},
	} {
		resp, b := h.do(tc.path, tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"gateway_retries"`) {
			t.Errorf("POST %s: %d %.200s, want 400 gateway_retries", tc.path, resp.StatusCode, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times, want none", n)
	}
	// No retry asked: forwarded.
	if resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"num_retries":0,"max_retries":null}`); resp.StatusCode != http.StatusOK {
		t.Errorf("num_retries 0: %d %.200s, want 200", resp.StatusCode, b)
	}
}
