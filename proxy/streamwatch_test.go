package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// watchUpstream is an upstream over real sockets that answers each chat
// request with an SSE stream named by its x-which header: the first event
// at once, then nothing until more[which] is closed (the second event and
// the end follow). cut[which] is closed when llmguard closes the stream's
// upstream connection before its end.
type watchUpstream struct {
	url       string
	more, cut map[string]chan struct{}
}

func newWatchUpstream(t *testing.T, names ...string) *watchUpstream {
	t.Helper()
	u := &watchUpstream{more: map[string]chan struct{}{}, cut: map[string]chan struct{}{}}
	for _, n := range names {
		u.more[n], u.cut[n] = make(chan struct{}), make(chan struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	chunk := func(w io.Writer, s string) {
		io.WriteString(w, strconv.FormatInt(int64(len(s)), 16)+"\r\n"+s+"\r\n")
	}
	event := func(text string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + text + `"}}]}` + "\n\n"
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				which := req.Header.Get("x-which")
				more, cut := u.more[which], u.cut[which]
				if more == nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
				chunk(c, event("first-"+which))
				ended := make(chan struct{})
				go func() { // the connection's end before the stream's: a cut
					if _, err := c.Read(make([]byte, 1)); err != nil {
						select {
						case <-ended:
						default:
							close(cut)
						}
					}
				}()
				select {
				case <-more:
				case <-cut:
					return
				}
				close(ended)
				chunk(c, event("second-"+which))
				chunk(c, "data: [DONE]\n\n")
				io.WriteString(c, "0\r\n\r\n")
			}()
		}
	}()
	u.url = "http://" + ln.Addr().String()
	return u
}

// streamClient sends a streamed chat request named which to the rig and
// returns its connection and a reader positioned after the line holding
// "first-<which>".
func streamClient(t *testing.T, r *panicRig, which string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100,"stream":true}`
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nx-which: "+which+
		"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	br := bufio.NewReader(c)
	readUntil(t, br, "first-"+which)
	return c, br
}

// readUntil reads lines from br until one holds marker.
func readUntil(t *testing.T, br *bufio.Reader, marker string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading to %q: %v", marker, err)
		}
		if strings.Contains(line, marker) {
			return
		}
	}
}

// TestStreamWatchCutsOnlyTheLeaver: two streams are relayed through real
// sockets, both upstreams silent after their first event; the client of
// one hangs up. The one watch goroutine cuts that stream's upstream at its
// first sweep after the hang-up (counted in sweeps, not timed), and the
// other stream, looked at in the same and the next sweep, goes on to its
// end.
func TestStreamWatchCutsOnlyTheLeaver(t *testing.T) {
	up := newWatchUpstream(t, "a", "b")
	r := newRig(t, rigOptions{url: up.url, w: testWeigher(t), timeout: 10 * time.Minute})
	sweeps := make(chan struct{}, 1024)
	r.px.watch.onSweep = func() {
		select {
		case sweeps <- struct{}{}:
		default:
		}
	}
	a, _ := streamClient(t, r, "a")
	_, bReader := streamClient(t, r, "b")
	drain := func() int {
		n := 0
		for {
			select {
			case <-sweeps:
				n++
			default:
				return n
			}
		}
	}
	drain()
	a.Close()
	select {
	case <-up.cut["a"]:
	case <-time.After(60 * time.Second): // only ends a hung run
		t.Fatal("the upstream of the client that left was not cut")
	}
	// The sweep under way when a left may have looked at a before; the
	// next one must have cut it.
	if n := drain(); n > 1 {
		t.Errorf("a cut after %d whole sweeps since its client left, want at most 1", n)
	}
	// Two more sweeps: b has been looked at after a was cut.
	for range 2 {
		select {
		case <-sweeps:
		case <-time.After(60 * time.Second): // only ends a hung run
			t.Fatal("the watch stopped sweeping while b is relayed")
		}
	}
	select {
	case <-up.cut["b"]:
		t.Fatal("the upstream of the client that stayed was cut")
	default:
	}
	close(up.more["b"])
	readUntil(t, bReader, "second-b")
	readUntil(t, bReader, "[DONE]")
	r.waitLedger(2)
	select {
	case <-up.cut["b"]:
		t.Error("the upstream of the client that stayed was cut before its end")
	default:
	}
}
