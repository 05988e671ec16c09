package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// An upstream that answers a chat completion with an informational status
// (101 Switching Protocols: fasthttp's client reads past the other 1xx
// answers but hands this one on as the final answer) gets the caller
// llmguard's own 502, not the 1xx: relayed, it left the caller waiting for
// a final answer that never came, holding its connection. The reservation stands (the upstream read the
// request and may have billed it). (Adversarial pass h6, 2026-12-03.)
func TestInformationalAnswerRefused(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	} {
		up := startRawUpstream(t, answer)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
		before := r.remaining()
		status, _, got, err := r.do("/v1/chat/completions", panicBody)
		if err != nil || status != 502 || !strings.Contains(got, `"upstream_error"`) {
			t.Fatalf("%q: status %d, err %v, body %s; want 502 upstream_error", answer[:12], status, err, got)
		}
		if spent := before - r.remaining(); spent < 50 {
			t.Errorf("%q: %d tokens kept; want the reservation (at least the 50 max_tokens) kept", answer[:12], spent)
		}
	}
}

// After a 101 the upstream's connection is closed, not pooled: the
// upstream below answers the first request on its first connection with
// 101, then answers whatever comes next on that connection with an answer
// of its own ("poison": what a switched protocol might send); every other
// connection gets a proper answer. The second request must get the proper
// one. (Without the close, fasthttp pooled the connection and the second
// request read the poison.)
func TestSwitchedConnectionNotReused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answer := func(body string) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	good := `{"id":"good","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	poison := `{"id":"poison","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					out := answer(good)
					if first {
						out = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
						if n > 0 {
							out = answer(poison)
						}
					}
					if _, err := io.WriteString(c, out); err != nil {
						return
					}
				}
			}()
		}
	}()
	r := newRig(t, rigOptions{url: "http://" + ln.Addr().String(), w: testWeigher(t)})
	if status, _, got, _ := r.do("/v1/chat/completions", panicBody); status != 502 {
		t.Fatalf("first request: status %d, body %s; want 502", status, got)
	}
	status, _, got, err := r.do("/v1/chat/completions", panicBody)
	if err != nil || status != 200 || !strings.Contains(got, `"good"`) {
		t.Fatalf("second request: status %d, err %v, body %s; want 200 with the good answer (a fresh connection)\n%s", status, err, got, r.log.String())
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections; want 2 (the switched one closed)", n)
	}
}
