package proxy

import (
	"strings"
	"testing"
)

// An upstream's own rate-limit fields (the gateway key's figures) and any
// x-llmguard-* field it sends do not reach the caller beside llmguard's
// under the same name in another letter case: the caller's SDK reads one
// field (Go's and fetch's Headers join the values: "5, 99987"). Before,
// fasthttp's SetCanonical replaced only a field spelled as llmguard
// spells it, so "X-RateLimit-Remaining-Tokens: 5" went on beside
// llmguard's x-ratelimit-remaining-tokens, "ratelimit" beside RateLimit,
// and a forged "X-Llmguard-Request-Id" beside the real one. A field
// llmguard does not write on that answer (the requests trio, with no
// requests rule) still passes as the upstream sent it.
func TestUpstreamLimitFieldsReplaced(t *testing.T) {
	for _, c := range []struct {
		flavor   Flavor
		path     string
		body     string
		answer   string
		replaced []string // llmguard writes these: each once, not the upstream's value
	}{
		{FlavorOpenAI, "/v1/chat/completions", panicBody,
			`{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			[]string{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}},
		{FlavorAnthropic, "/v1/messages", `{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`,
			`{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}`,
			[]string{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"}},
	} {
		up := startRawUpstream(t, "HTTP/1.1 200 OK\r\n"+
			"Content-Type: application/json\r\n"+
			"X-RateLimit-Remaining-Tokens: 5\r\n"+
			"x-ratelimit-limit-tokens: 7\r\n"+
			"X-RATELIMIT-RESET-TOKENS: 9s\r\n"+
			"x-ratelimit-remaining-requests: 42\r\n"+
			"Anthropic-Ratelimit-Tokens-Remaining: 5\r\n"+
			"anthropic-ratelimit-tokens-limit: 7\r\n"+
			"ANTHROPIC-RATELIMIT-TOKENS-RESET: 2020-01-01T00:00:00Z\r\n"+
			"anthropic-ratelimit-requests-remaining: 42\r\n"+
			"ratelimit: \"up\";r=5;t=9\r\n"+
			"RATELIMIT-POLICY: \"up\";q=7;w=9\r\n"+
			"X-Llmguard-Request-Id: forged\r\n"+
			"x-LLMGUARD-wait-ms: 99999\r\n"+
			"Content-Length: "+itoa(len(c.answer))+"\r\n\r\n"+c.answer)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t), flavor: c.flavor})
		status, h, got, err := r.do(c.path, c.body)
		if err != nil || status != 200 {
			t.Fatalf("%v: status %d, err %v, body %s", c.flavor, status, err, got)
		}
		for _, name := range append(c.replaced, "Ratelimit", "Ratelimit-Policy", "X-Llmguard-Request-Id") {
			v := h.Values(name)
			if len(v) != 1 {
				t.Errorf("%v: %s: %q; want llmguard's value alone", c.flavor, name, v)
				continue
			}
			if v[0] == "5" || v[0] == "7" || v[0] == "9s" || strings.HasPrefix(v[0], "2020") || strings.Contains(v[0], `"up"`) || v[0] == "forged" {
				t.Errorf("%v: %s: %q is the upstream's", c.flavor, name, v[0])
			}
		}
		if v := h.Values("X-Llmguard-Wait-Ms"); len(v) != 0 {
			t.Errorf("%v: x-llmguard-wait-ms %q reached the caller from the upstream", c.flavor, v)
		}
		kept := "X-Ratelimit-Remaining-Requests"
		if c.flavor == FlavorAnthropic {
			kept = "Anthropic-Ratelimit-Requests-Remaining"
		}
		if v := h.Values(kept); len(v) != 1 || v[0] != "42" {
			t.Errorf("%v: %s %q; want the upstream's 42 (llmguard writes no requests field here)", c.flavor, kept, v)
		}
	}
}
