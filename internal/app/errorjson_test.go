package app

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// llmguard's own error bodies are JSON whatever bytes the caller put in
// the path or the model it quotes: a path byte that is not UTF-8, a path
// clipped inside a UTF-8 sequence, a control character in a model name.
// (strconv.AppendQuote wrote Go escapes such as \xff and \a; found by the
// adversarial pass of 2026-12-03.) A doubled /v1 is refused in any case.
func TestErrorBodiesAreJSON(t *testing.T) {
	h := startFlavors(t, "  - {name: spend, scope: user, unit: usd, rate: 1, per: 24h, burst: 100}\n")
	check := func(what string, status int, b string) {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil || !utf8.ValidString(b) {
			t.Errorf("%s: %d, error body is not UTF-8 JSON (%v): %.200q", what, status, err, b)
		}
	}
	for _, p := range []string{"/v1/x%FF", "/v1/chat/completion%FF", "/v1/v1/%FFmessages", "/v1/x" + strings.Repeat("%C3%A9", 120)} {
		resp, b := h.do(p, `{}`)
		check("POST "+p[:min(len(p), 40)], resp.StatusCode, b)
	}
	for _, m := range []string{`gpt-x\u0007`, `gpt-x\udb40\udc01`} {
		resp, b := h.do("/v1/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		check("model "+m, resp.StatusCode, b)
	}
	before := lastUpstreamURI(h)
	for _, p := range []string{"/V1/v1/messages", "/V1/V1/chat/completions", "/v1/V1/messages"} {
		resp, b := h.do(p, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
			"x-api-key", testKey, "anthropic-version", "2023-06-01")
		if resp.StatusCode != 404 || !strings.Contains(b, "repeats /v1") {
			t.Errorf("POST %s: %d %.160s, want 404 repeats /v1", p, resp.StatusCode, b)
		}
	}
	if got := lastUpstreamURI(h); got != before {
		t.Errorf("a doubled /v1 reached the upstream as %s", got)
	}
}
