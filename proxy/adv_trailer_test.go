package proxy

import (
	"strings"
	"testing"
)

// TestPassThroughTrailerAnnouncedCredential: a pass-through caller whose
// credential field is also announced as a trailer (so fasthttp holds
// fields of that name apart) gets only the key it was limited under to the
// upstream.
func TestPassThroughTrailerAnnouncedCredential(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":1}}`
	req := `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	for i, hdrs := range []string{
		"x-api-key: sk-pt-limited\r\nTrailer: X-Api-Key\r\nX-Api-Key: sk-pt-smuggled\r\n",
		"Trailer: X-Api-Key\r\nx-api-key: sk-pt-limited\r\nX-Api-Key: sk-pt-smuggled\r\n",
		"x-api-key: sk-pt-limited\r\nX-Api-Key: sk-pt-smuggled\r\nTrailer: X-Api-Key\r\n",
		"x-api-key: sk-pt-limited\r\nConnection: keep-alive\r\nTrailer: x-api-key\r\nX-API-KEY: sk-pt-smuggled\r\n",
	} {
		up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t), flavor: FlavorAnthropic})
		resp, got, err := rawPost(t, r.url, "POST /v1/messages HTTP/1.1\r\nHost: llmguard\r\n"+hdrs, req)
		if err != nil {
			t.Fatal(err)
		}
		sent := up.lastHeaders()
		if resp.StatusCode == 200 && (strings.Contains(sent, "smuggled") || !strings.Contains(sent, "sk-pt-limited")) {
			t.Errorf("%d: status %d %s; upstream got\n%s", i, resp.StatusCode, got, sent)
		}
	}
}
