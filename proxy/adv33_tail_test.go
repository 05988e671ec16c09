package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A keep-alive tail: an upstream that sends bytes past an answer's end (a
// Content-Length too small, bytes after a chunked body's last chunk) on a
// connection llmguard pools. Over plain TCP the tail waits in the socket,
// and the look before the next request is written on the connection
// (idlePeek) refuses it. Over TLS, the tail's records can be read from the
// socket together with the answer's last record and wait inside the TLS
// session, where no look at the socket sees them: the next request sent on
// the connection read the tail as its own answer — another call's bytes,
// and its usage, charged instead of the answer the upstream gave it.

// tlsByteUpstream is byteUpstream over TLS: serve writes to the TLS session
// tc; hold(true) keeps what the session writes until hold(false)
// sends it to the socket at once, so that two records arrive together. It
// returns the base URL and the TLS configuration that trusts it.
func tlsByteUpstream(t *testing.T, serve func(tc *tls.Conn, hold func(bool), n int) bool) (string, *tls.Config) {
	t.Helper()
	// httptest's certificate (for 127.0.0.1 and example.com), served by
	// a listener of our own.
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	s.StartTLS()
	cfg, cert := s.TLS.Clone(), s.Certificate()
	s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				hc := &heldConn{Conn: c}
				tc := tls.Server(hc, cfg)
				br := bufio.NewReader(tc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !serve(tc, hc.hold, int(n.Add(1)-1)) {
						return
					}
				}
			}()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return "https://" + ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "example.com"}
}

// heldConn is a connection whose writes wait while held.
type heldConn struct {
	net.Conn
	mu      sync.Mutex
	holding bool
	held    []byte
}

func (h *heldConn) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding {
		h.held = append(h.held, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

// hold starts holding writes (on) or sends what was held (off).
func (h *heldConn) hold(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holding = on
	if !on && len(h.held) > 0 {
		// crypto/tls's CloseWrite leaves the socket's write deadline at
		// the instant it sent its alert.
		h.Conn.SetWriteDeadline(time.Time{})
		h.Conn.Write(h.held)
		h.held = nil
	}
}

// The first call's answer ends with a tail (a whole answer reporting 1+1
// tokens); the second call's own answer reports 1+40. The second call must
// get its own answer and be charged its 41 tokens, over TLS as over TCP,
// whatever framed the first answer.
func TestTailPastAnAnswerIsNotTheNextAnswer(t *testing.T) {
	w := testWeigher(t)
	tail := response([]byte(`{"usage":{"prompt_tokens":1,"completion_tokens":1},"tail":"another call's answer"}`))
	own := []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":40},"own":"the second call's answer"}`)
	first := jsonAnswer(300)
	for _, tc := range []struct {
		name  string
		first []byte // the first answer, before the tail
	}{
		{name: "content-length", first: response(first)},
		{name: "chunked", first: []byte("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n" +
			itoaHex(len(first)) + "\r\n" + string(first) + "\r\n0\r\n\r\n")},
	} {
		for _, overTLS := range []bool{false, true} {
			name := tc.name + map[bool]string{false: " over TCP", true: " over TLS"}[overTLS]
			t.Run(name, func(t *testing.T) {
				var url string
				var cfg *tls.Config
				if overTLS {
					url, cfg = tlsByteUpstream(t, func(c *tls.Conn, hold func(bool), n int) bool {
						if n == 0 {
							hold(true) // the answer and its tail reach the socket together
							c.Write(tc.first)
							c.Write(tail)
							hold(false)
							return true
						}
						c.Write(response(own))
						return true
					})
				} else {
					url = byteUpstream(t, func(c net.Conn, n int) bool {
						if n == 0 {
							c.Write(append(append([]byte(nil), tc.first...), tail...))
							return true
						}
						c.Write(response(own))
						return true
					})
				}
				r := newRig(t, rigOptions{url: url, w: w, tls: cfg})
				if status, body, err := r.post(budgetBody); err != nil || status != 200 || body != string(first) {
					t.Fatalf("first call: status %d, body %.80q (%v)", status, body, err)
				}
				callGetsItsOwnAnswer(t, r, own, "second call")
			})
		}
	}
}

// itoaHex is n in hexadecimal, a chunk's size line.
func itoaHex(n int) string { return strconv.FormatInt(int64(n), 16) }

// A caller's HEAD on a path passed through, answered by a lenient upstream
// with a body (RFC 9110 §9.3.2: a HEAD answer has none, so fasthttp reads
// none): over TLS that body waited in the session, and the next call on the
// connection — another caller's — read it first and failed (a 502 that kept
// its 58-token reservation though the upstream answered it). The next call
// must get its own answer and be charged it.
func TestHeadAnsweredWithABodyIsNotTheNextAnswer(t *testing.T) {
	w := testWeigher(t)
	planted := response([]byte(`{"usage":{"prompt_tokens":1,"completion_tokens":1},"planted":"by a HEAD's body"}`))
	own := []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":40},"own":"the second call's answer"}`)
	url, cfg := tlsByteUpstream(t, func(c *tls.Conn, hold func(bool), n int) bool {
		if n == 0 {
			head := response(planted)
			hold(true) // the head and the body, two records, reach the socket together
			c.Write(head[:len(head)-len(planted)])
			c.Write(planted)
			hold(false)
			return true
		}
		c.Write(response(own))
		return true
	})
	r := newRig(t, rigOptions{url: url, w: w, tls: cfg})
	req, err := http.NewRequest(http.MethodHead, r.url+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-panic")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HEAD: status %d", resp.StatusCode)
	}
	callGetsItsOwnAnswer(t, r, own, "call after the HEAD")
}

// A TLS upstream that says goodbye (close_notify) right after an answer,
// its socket still open, has its alert read by the session along with the
// answer's end: the next request must go on a fresh connection, not be
// written on the one the upstream is done with (whose read ended at once:
// a 502 that kept the reservation of a call the upstream never answered).
func TestTLSGoodbyeAfterAnAnswerIsNotWrittenOn(t *testing.T) {
	w := testWeigher(t)
	own := []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":40},"own":"the second call's answer"}`)
	url, cfg := tlsByteUpstream(t, func(c *tls.Conn, hold func(bool), n int) bool {
		if n == 0 {
			hold(true) // the answer and the alert reach the socket together
			c.Write(response(jsonAnswer(300)))
			c.CloseWrite() // close_notify; the TCP connection stays open
			hold(false)
			return true // and reads on: a request written here gets no answer
		}
		c.Write(response(own))
		return true
	})
	r := newRig(t, rigOptions{url: url, w: w, tls: cfg})
	if status, _, err := r.post(budgetBody); err != nil || status != 200 {
		t.Fatalf("first call: status %d (%v)", status, err)
	}
	callGetsItsOwnAnswer(t, r, own, "second call")
}

// BenchmarkTLSUnread is the look into a reused TLS upstream session made
// before each request written on it (tlsUnread), with nothing held; run
// with BenchmarkIdlePeek for the ratio of the two looks.
//
//	go test -run X -bench 'IdlePeek|TLSUnread' -benchmem ./proxy
func BenchmarkTLSUnread(b *testing.B) {
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	s.StartTLS()
	cfg, cert := s.TLS.Clone(), s.Certificate()
	s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, tls.Server(c, cfg)) // handshakes, then waits
	}()
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "example.com"})
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	var peek [1]byte
	b.ReportAllocs()
	for b.Loop() {
		if tlsUnread(tc, peek[:]) {
			b.Fatal("a session with nothing held looks unusable")
		}
	}
}

// callGetsItsOwnAnswer posts a call through r that its upstream answers
// with own (usage 1+40) and checks, naming the call what, that it got own
// and was charged its 41 tokens: not another call's bytes, not a 502 that
// kept its reservation.
func callGetsItsOwnAnswer(t *testing.T, r *panicRig, own []byte, what string) {
	t.Helper()
	before := r.remaining()
	status, body, err := r.post(budgetBody)
	if err != nil || status != 200 || body != string(own) {
		t.Errorf("%s: status %d, body %.120q (%v), want its own answer", what, status, body, err)
	}
	if charged := before - r.remaining(); charged != 41 {
		t.Errorf("%s charged %d tokens, want its own answer's 41", what, charged)
	}
}
