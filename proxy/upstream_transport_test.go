package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The retry rule is net/http's: only on a reused connection, and only a
// request the upstream cannot have seen, or a repeatable one that got no
// byte of an answer.
func TestRetryableFollowsNetHTTP(t *testing.T) {
	post := func(h ...string) *fasthttp.Request {
		r := new(fasthttp.Request)
		r.Header.SetMethod(fasthttp.MethodPost)
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	get := new(fasthttp.Request)
	get.Header.SetMethod(fasthttp.MethodGet)
	for _, tc := range []struct {
		name          string
		exchanges     int
		written, read int64
		req           *fasthttp.Request
		err           error
		want          bool
	}{
		{name: "fresh connection, nothing written", exchanges: 1, req: post(), err: errIdleClosed, want: false},
		{name: "fresh connection, GET without an answer", exchanges: 1, written: 100, req: get, err: io.EOF, want: false},
		{name: "reused, nothing written", exchanges: 2, req: post(), err: errIdleClosed, want: true},
		{name: "reused, POST written, no answer", exchanges: 2, written: 100, req: post(), err: io.EOF, want: false},
		{name: "reused, POST with Idempotency-Key, no answer: never replayed (the upstream may have billed it)", exchanges: 3, written: 100, req: post("Idempotency-Key", "k"), err: io.EOF, want: false},
		{name: "reused, POST with X-Idempotency-Key, no answer: never replayed", exchanges: 2, written: 100, req: post("X-Idempotency-Key", "k"), err: io.EOF, want: false},
		{name: "reused, GET, no answer", exchanges: 2, written: 100, req: get, err: io.EOF, want: true},
		{name: "reused, GET, answer bytes read", exchanges: 2, written: 100, read: 17, req: get, err: errors.New("broken header"), want: false},
		{name: "reused, GET, timed out", exchanges: 2, written: 100, req: get, err: fasthttp.ErrTimeout, want: false},
	} {
		c := &upstreamConn{exchanges: tc.exchanges, written: tc.written, read: tc.read}
		if got := c.retryable(tc.req, tc.err); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// loopbackPair returns both ends of a TCP connection on 127.0.0.1.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// An upstreamConn starts a new exchange at the first write after a read;
// on a reused connection it writes nothing when the upstream has closed it
// or sent what nobody asked for.
func TestUpstreamConnRefusesAClosedIdleConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("idle connections are inspected on Linux only")
	}
	for _, tc := range []struct {
		name     string
		upstream func(net.Conn) // what the upstream does while the connection is idle
		want     error
	}{
		{name: "alive", upstream: func(net.Conn) {}, want: nil},
		{name: "closed", upstream: func(c net.Conn) { c.Close() }, want: errIdleClosed},
		{name: "unsolicited bytes", upstream: func(c net.Conn) { io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\n\r\n") }, want: errIdleClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, srv := loopbackPair(t)
			c := &upstreamConn{Conn: cl, tcp: cl}
			// Exchange 1: request, answer.
			if _, err := c.Write([]byte("req1")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			io.ReadFull(srv, buf)
			io.WriteString(srv, "ans1")
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
			tc.upstream(srv)
			// Let what the upstream did reach our socket (loopback delivers
			// it at once; this is slack, not a bound).
			time.Sleep(50 * time.Millisecond)
			n, err := c.Write([]byte("req2"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("second write: %v, want %v", err, tc.want)
			}
			if c.exchanges != 2 {
				t.Errorf("exchanges %d, want 2", c.exchanges)
			}
			if tc.want != nil && (n != 0 || c.written != 0) {
				t.Errorf("wrote %d bytes on a connection the upstream closed", n)
			}
		})
	}
}

// Over TLS, as real upstreams speak: connections are reused, and one the
// upstream closed while idle (its close_notify and FIN waiting on the
// socket) is found before a request is written on it; the request goes on
// a fresh connection.
func TestUpstreamTLSIdleCloseIsRetried(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	u := &Upstream{Name: "tls", BaseURL: srv.URL, Timeout: 10 * time.Second, MaxConns: 1, IdleTimeout: time.Minute,
		tlsConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"}}
	if err := u.init(); err != nil {
		t.Fatal(err)
	}
	call := func() error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(srv.URL + "/v1/chat/completions")
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetBodyRaw([]byte(`{}`))
		if err := u.client.DoTimeout(req, resp, 10*time.Second); err != nil {
			return err
		}
		if resp.StatusCode() != 200 {
			return fmt.Errorf("status %d", resp.StatusCode())
		}
		if _, err := io.Copy(io.Discard, resp.BodyStream()); err != nil {
			return err
		}
		return resp.CloseBodyStream()
	}
	for i := range 2 {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two calls, want one reused", n)
	}
	srv.CloseClientConnections() // the upstream drops its idle connection
	time.Sleep(50 * time.Millisecond)
	if err := call(); err != nil {
		t.Fatalf("call after the upstream closed the idle connection: %v", err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want the retry on a second one", n)
	}
}

// BenchmarkIdlePeek is the look at a reused upstream connection made
// before each request written on it (idlePeek.unusable), on a loopback
// TCP connection with nothing to read.
//
//	go test -run X -bench IdlePeek -benchmem ./proxy
func BenchmarkIdlePeek(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	p := newIdlePeek(c)
	b.ReportAllocs()
	for b.Loop() {
		if unusable, ok := p.unusable(); unusable || !ok {
			b.Fatalf("unusable %v, ok %v", unusable, ok)
		}
	}
}
