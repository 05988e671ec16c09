package proxy

import (
	"bufio"
	"bytes"
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
		resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-pt-limited\r\n"+second+"\r\n", panicBody)
		if err != nil {
			t.Fatal(err)
		}
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

// rawPost writes one hand-made HTTP/1.1 request to the proxy at url
// ("http://host:port"): head is its request line and fields, each line
// ending in "\r\n"; Content-Type JSON, Connection: close and the
// Content-Length of body are added. It returns the answer and its body, or
// the error reading the answer (a request refused by closing the
// connection). Hand-made because net/http's client normalises what these
// tests send on purpose (field case, duplicates, Trailer, folded lines).
func rawPost(t *testing.T, url, head, body string) (*http.Response, []byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, head+"Content-Type: application/json\r\nConnection: close\r\n"+
		"Content-Length: "+itoa(len(body))+"\r\n\r\n"+body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	got, _ := io.ReadAll(resp.Body)
	return resp, got, nil
}

// TestPassThroughCredentialOneToken: a pass-through credential that is not
// one token68 ("sk-pt-a junk", "sk-pt-a, sk-pt-b", or longer than 4096
// bytes) is refused with 401 and
// never reaches the upstream: llmguard would limit each such variant as a
// caller of its own while an upstream reading the key before the break
// would bill them all to one key.
func TestPassThroughCredentialOneToken(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t), readBuffer: 16 << 10})
	for _, field := range []string{"Authorization: Bearer sk-pt-a junk", "Authorization: Bearer sk-pt-a, sk-pt-b", "x-api-key: sk-pt-a sk-pt-b", `Authorization: Bearer "sk-pt-a"`} {
		resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\n"+field+"\r\n", panicBody)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 401 || !bytes.Contains(got, []byte("token68")) {
			t.Errorf("%q: status %d, body %s; want 401 saying why (token68)", field, resp.StatusCode, got)
		}
	}
	// One token longer than 4096 bytes is refused too, and the answer
	// names the length, not a character the key does not have.
	long := "Authorization: Bearer sk-" + strings.Repeat("a", 4096)
	resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\n"+long+"\r\n", panicBody)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 401 || !bytes.Contains(got, []byte("at most 4096 bytes")) {
		t.Errorf("a 4099-byte token: status %d, body %s; want 401 naming the 4096-byte bound", resp.StatusCode, got)
	}
	if sent := up.lastHeaders(); sent != "" {
		t.Errorf("the upstream got a request:\n%s", sent)
	}
	// One token still passes.
	resp, got, err = rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-pt-a\r\n", panicBody)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("one token: %v %v %s", err, resp, got)
	}
}

// TestHeaderTooLargeIs431: a request whose line and headers overflow the
// server's read buffer gets 431 request_header_too_large, not the
// malformed-request 400 (a new user's 20 KB Authorization
// header read "Malformed HTTP request (or a body that ended before its
// declared length)").
func TestHeaderTooLargeIs431(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	big := "Authorization: Bearer sk-" + strings.Repeat("a", 5000)
	resp, got, err := rawPost(t, r.url, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\n"+big+"\r\n", panicBody)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 431 || !bytes.Contains(got, []byte(`"code":"request_header_too_large"`)) {
		t.Errorf("status %d, body %s; want 431 request_header_too_large", resp.StatusCode, got)
	}
}
