package app

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Transport probes of the eleventh round that held: a caller's header
// flood, pipelined weighed requests, and an upstream whose header never
// ends. Each drives llmguard through real sockets and checks it answers
// and serves the next request.

// chat11 is a small weighed chat body.
const chat11 = `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`

// post11 writes one chat request with extra header lines to w.
func post11(w *strings.Builder, extra string) {
	fmt.Fprintf(w, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", testKey, extra, len(chat11), chat11)
}

// A caller sending 1 MiB of header fields gets an error status or a
// closed connection, never a hang, and the next caller is served.
func TestAdv11HeaderFloodRefused(t *testing.T) {
	h := start(t, "")
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	post11(&b, strings.Repeat("X-Flood: "+strings.Repeat("a", 1000)+"\r\n", 1024))
	go c.Write([]byte(b.String())) // the server may close before it reads it all
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("a 1 MiB header got %d", resp.StatusCode)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("no answer to a 1 MiB header within 60 s")
	}
	if resp, body := h.post(testKey, chat11); resp.StatusCode != http.StatusOK {
		t.Fatalf("next request: %d %s", resp.StatusCode, body)
	}
}

// Two weighed requests pipelined in one write are both answered, in order.
func TestAdv11PipelinedRequestsAnswered(t *testing.T) {
	h := start(t, "")
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	post11(&b, "")
	post11(&b, "")
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	for i := range 2 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("answer %d: %d", i, resp.StatusCode)
		}
	}
}

// An upstream whose header never ends (a header line every millisecond,
// for ever) gets its caller a 502 once 16 KiB have come, not a hang.
func TestAdv11EndlessUpstreamHeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				c.Read(buf)
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"))
				for i := 0; ; i++ {
					if _, err := fmt.Fprintf(c, "X-%d: %s\r\n", i, strings.Repeat("b", 100)); err != nil {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}()
	h := fresh16(t, "http://"+ln.Addr().String())
	resp, body := h.do("/v1/chat/completions", chat11)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("an endless upstream header: %d %.200s, want 502", resp.StatusCode, body)
	}
}
