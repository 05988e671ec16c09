package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPipelinedCallsEachAnsweredAndCharged: a caller that pipelines
// HTTP/1.1 requests (three written at once, the answers read after) gets
// each its own answer, in order, and each is charged what its upstream
// reported: none is lost, merged or served twice.
func TestPipelinedCallsEachAnsweredAndCharged(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
	before := r.remaining()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // only ends a failing run
	one := "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(panicBody)) + "\r\n\r\n" + panicBody
	if _, err := io.WriteString(c, one+one+one); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 3 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(got) != body {
			t.Fatalf("answer %d: %d %q", i, resp.StatusCode, got)
		}
	}
	if spent := before - r.remaining(); spent != 3*4 {
		t.Errorf("charged %d tokens for three calls reporting 4 each, want 12", spent)
	}
}
