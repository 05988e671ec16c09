package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestPassThroughDuplicateCredentialNotForwarded: a pass-through caller is
// limited under the key its first credential field carries; a second field
// of the same name (or the same name in another case) carrying another key
// must not reach the upstream, which may bill that one instead.
func TestPassThroughDuplicateCredentialNotForwarded(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	for _, second := range []string{"Authorization: Bearer sk-pt-smuggled", "authorization: Bearer sk-pt-smuggled", "AUTHORIZATION: Bearer sk-pt-smuggled"} {
		up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
		c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-pt-limited\r\n"+second+"\r\n"+
			"Content-Type: application/json\r\nConnection: close\r\n"+
			"Content-Length: "+itoa(len(panicBody))+"\r\n\r\n"+panicBody)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != 200 {
			// Refusing the request is as good as not forwarding the key.
			t.Logf("%q: status %d, body %s", second, resp.StatusCode, got)
			continue
		}
		if sent := up.lastHeaders(); strings.Contains(sent, "smuggled") {
			t.Errorf("%q: upstream got the second key:\n%s", second, sent)
		} else if strings.Count(sent, "Bearer sk-pt-limited") != 1 {
			t.Errorf("%q: upstream did not get the limited key once:\n%s", second, sent)
		}
	}
}
