package proxy

import (
	"strings"
	"testing"
)

// TestOddCredentialFieldNamesNotForwarded: credential fields a caller
// spells oddly (whitespace before the colon, a tab, folded lines) either
// get the request refused or do not reach the upstream.
func TestOddCredentialFieldNamesNotForwarded(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	for i, odd := range []string{
		"X-Api-Key : sk-smuggled\r\n",
		"X-Api-Key\t: sk-smuggled\r\n",
		"X-Api-Key:\r\n sk-smuggled\r\n",
		" X-Api-Key: sk-smuggled\r\n",
		"Api-Key : sk-smuggled\r\n",
		"Cookie : sk-smuggled\r\n",
		"OpenAI-Organization : org-smuggled\r\n",
	} {
		up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
		resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-panic\r\n"+odd, panicBody)
		if err != nil {
			continue // refused outright
		}
		// A folded line (obs-fold) joins the Authorization value, which
		// then is the caller's whole (pass-through) credential: only a
		// field of its own counts as smuggled.
		sent := up.lastHeaders()
		for _, line := range strings.Split(sent, "\r\n") {
			name, _, _ := strings.Cut(line, ":")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "x-api-key", "api-key", "cookie", "openai-organization":
				t.Errorf("%d %q: status %d %s; upstream got\n%s", i, odd, resp.StatusCode, got, sent)
			}
		}
	}
}
