package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// A client that asks for a large admin answer and reads none of it loses
// its connection once a write has waited adminWriteTimeout: before, the
// answer (here 10 MB of /admin/usage; tens of MB for 100,000 users) and
// the connection were held for as long as the client stayed. The answer's
// bytes are in long user names, not many users: it must outgrow the
// server's send buffer (loopback autotunes it up to 4 MiB), and each user
// costs a record's decoding and a row (20,000 users took 72 s of the
// package's race run under load).
func TestAdminNonReaderIsCut(t *testing.T) {
	defer func(w time.Duration) { adminWriteTimeout = w }(adminWriteTimeout)
	adminWriteTimeout = time.Second // longer than the test can be held up between its write and its first look (below)
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	const users, nameBytes = 2_000, 2_000
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var b strings.Builder
	for i := range users {
		fmt.Fprintf(&b, `{"ts":%q,"request_id":"r-%d","key_id":"k","user":"u%07d-%s","tenant":"acme","model":"m","flavor":"openai","status":200,"input_tokens":1,"output_tokens":1,"cost_micro_usd":1}`+"\n",
			now, i, i, strings.Repeat("x", nameBytes))
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h := usageApp(t, file, nil)
	// A receive buffer of 4 KiB: the answer cannot hide in it.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(h.admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /admin/usage HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The server closes its side: its count of open admin connections goes
	// back to 0. The bound only ends a failing run.
	open := func() int {
		h.app.adminCap.mu.Lock()
		defer h.app.adminCap.mu.Unlock()
		return h.app.adminCap.open
	}
	// First the server takes the connection (under load it may not have
	// yet: a count of 0 then says nothing, and the client would go on to
	// read the answer whole as it came), then it lets it go.
	for i := 0; open() == 0; i++ {
		if i == 3000 {
			t.Fatal("the admin listener did not count the connection in 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; open() != 0; i++ {
		if i == 3000 {
			t.Fatalf("a client reading nothing of a %d-user usage answer still held its admin connection after 60 s", users)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// What it reads now breaks off before the answer's end.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Errorf("the cut answer was read whole (%d bytes)", n)
		}
	}
}
