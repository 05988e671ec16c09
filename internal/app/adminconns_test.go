package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that fills the admin listener with connections that each send
// half a request (opened again as the read timeout closes them) must not
// keep the health probes and scrapes out: a liveness probe answered 503
// restarts a healthy proxy. Before, the admin server refused every
// connection past its 256 with fasthttp's 503 ("Server.Concurrency limit
// exceeded") for as long as the half-sent ones were held (30 s each); now
// the new connection closes the oldest of the peer holding the most.
func TestAdminProbesPassAFullListener(t *testing.T) {
	h := start(t, slowTPM)
	addr := strings.TrimPrefix(h.admin, "http://")
	var half []net.Conn
	for range adminMaxConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		half = append(half, c)
	}
	// Each probe comes after the half-sent connections in the accept
	// queue, so the listener holds them all when it takes the probe.
	for probe := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// The deadline only ends a failing run.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("probe %d: %v, want 200", probe, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %d behind %d half-sent connections: %d %q, want 200", probe, adminMaxConnections, resp.StatusCode, body)
		}
	}
	// The oldest half-sent connection made room: closed by llmguard
	// without an answer. (The next probes may find room without an
	// eviction, once the server has closed the probe before them.)
	half[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := half[0].Read(make([]byte, 1)); err == nil {
		t.Errorf("the oldest half-sent connection: read %d bytes, want it closed", n)
	}
}

// fakeConn is a connection from a given remote address that records its
// closing.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// The connection closed for a new one is the oldest of the peer holding
// the most, never one of a peer holding fewer: a probe from its own
// address survives any number of connections from another.
func TestAdminConnsEvictTheLargestPeer(t *testing.T) {
	a := newAdminConns(4, discardLog())
	from := func(ip string) *fakeConn {
		return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}}
	}
	probe := from("10.0.0.9")
	flood := []*fakeConn{from("10.0.0.1"), from("10.0.0.1"), from("10.0.0.1")}
	a.add(flood[0])
	a.add(probe)
	a.add(flood[1])
	a.add(flood[2])
	steps := []struct {
		name    string
		next    *fakeConn
		evicted *fakeConn
	}{
		{"step 1 (full): the flood's oldest goes", from("10.0.0.1"), flood[0]},
		{"step 2 (full): its next oldest", from("10.0.0.1"), flood[1]},
	}
	for _, s := range steps {
		a.add(s.next)
		if !s.evicted.closed {
			t.Errorf("%s: not closed", s.name)
		}
		if probe.closed {
			t.Fatalf("%s: the probe's connection was closed", s.name)
		}
	}
	if a.open != 4 {
		t.Errorf("open = %d, want 4", a.open)
	}
	// A connection closed by its server gives its place back once, also
	// after an eviction made its peer's list shorter.
	wrapped := a.add(from("10.0.0.2"))
	if a.open != 4 {
		t.Errorf("after a fifth: open = %d, want 4", a.open)
	}
	wrapped.Close()
	wrapped.Close()
	if a.open != 3 {
		t.Errorf("after a close: open = %d, want 3", a.open)
	}
}
