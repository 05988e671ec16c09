package proxy

import (
	"strings"
	"testing"
)

// TestRewriteFieldsNotForwarded: X-Original-URL, X-Rewrite-URL and the
// method-override fields make some upstream frameworks run another path or
// method than the one llmguard weighed and limited; none reaches the
// upstream, in any case, for a virtual-key caller or a pass-through one,
// while an ordinary end-to-end field still does.
func TestRewriteFieldsNotForwarded(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	fields := "X-Original-URL: /v1/images/generations\r\n" +
		"x-rewrite-url: /v1/images/generations\r\n" +
		"X-HTTP-Method-Override: PUT\r\n" +
		"X-HTTP-METHOD: DELETE\r\n" +
		"x-method-override: PATCH\r\n" +
		"X-End-Req: kept\r\n"
	for _, key := range []string{"sk-panic", "sk-pt-caller"} {
		up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
		resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer "+key+"\r\n"+fields, panicBody)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v %s", key, err, resp, got)
		}
		sent := strings.ToLower(up.lastHeaders())
		for _, k := range []string{"x-original-url:", "x-rewrite-url:", "x-http-method-override:", "x-http-method:", "x-method-override:"} {
			if strings.Contains(sent, k) {
				t.Errorf("%s: upstream got %s\n%s", key, k, sent)
			}
		}
		if !strings.Contains(sent, "x-end-req: kept") {
			t.Errorf("%s: end-to-end request field lost:\n%s", key, sent)
		}
	}
}
