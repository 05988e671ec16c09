package app

// Adversarial tests of the third review: each drives llmguard through real
// loopback sockets to an upstream that bills what it reads and fails where
// the upstream billed more than llmguard admitted.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRoundTrip writes req (a whole HTTP/1.1 request, as bytes on the wire)
// to addr on a connection of its own and returns the answer's status and
// body; status 0 when no answer could be read.
func rawRoundTrip(t *testing.T, url, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard, not a timing bound
	if _, err := io.WriteString(c, req); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// A read method (GET, HEAD, DELETE, OPTIONS, in any case) counts as one
// request whatever its path, so it must not carry a body to the upstream:
// an upstream that routes by path alone (internal/mockllm does; so do
// handlers registered without a method) serves a GET with a chat body as a
// chat completion and bills it. Through a 1,000-token bucket, each such
// call billed 100,022 tokens and the bucket still held 1,000.
func TestAdv13ReadMethodWithBodyNotForwarded(t *testing.T) {
	up := startBilling(t, 1000, 0)
	h := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	head := "Host: llmguard\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\nConnection: close\r\n"
	for _, tc := range []struct{ name, req string }{
		{"GET", "GET /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"get", "get /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"DELETE", "DELETE /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"OPTIONS", "OPTIONS /v1/responses HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"HEAD", "HEAD /v1/chat/completions HTTP/1.1\r\n" + head + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{"GET chunked", "GET /v1/chat/completions HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)},
	} {
		st, got := rawRoundTrip(t, h.url, tc.req)
		if st == http.StatusOK {
			t.Errorf("%s with a chat body: %d %.80s", tc.name, st, got)
		}
	}
	if billed := up.reported.Load() + up.silent.Load(); billed > 1000 {
		t.Errorf("the upstream billed %d tokens through a 1,000-token bucket", billed)
	}
	// A read without a body (or with an empty one) still passes.
	for _, req := range []string{
		"GET /v1/models HTTP/1.1\r\n" + head + "\r\n",
		"DELETE /v1/files/file-abc HTTP/1.1\r\n" + head + "Content-Length: 0\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		if st, got := rawRoundTrip(t, h.url, req); st != http.StatusOK {
			t.Errorf("%q: %d %.80s, want 200", req[:strings.IndexByte(req, '\r')], st, got)
		}
	}
}
