package proxy

import (
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// recordingConn records the writes it is given and the deadlines set
// before them.
type recordingConn struct {
	net.Conn
	ops []string
}

func (c *recordingConn) SetWriteDeadline(time.Time) error {
	c.ops = append(c.ops, "deadline")
	return nil
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.ops = append(c.ops, "write "+strconv.Itoa(len(p)))
	return len(p), nil
}

// A write is made in slices of at most 64 KiB, each under a fresh
// deadline.
func TestWriteTimeoutConnSlicesWrites(t *testing.T) {
	rc := &recordingConn{}
	c := &writeTimeoutConn{Conn: rc, d: time.Second}
	n, err := c.Write(make([]byte, 3*clientWriteSlice+10))
	if err != nil || n != 3*clientWriteSlice+10 {
		t.Fatalf("wrote %d, %v", n, err)
	}
	want := []string{"deadline", "write 65536", "deadline", "write 65536", "deadline", "write 65536", "deadline", "write 10"}
	if len(rc.ops) != len(want) {
		t.Fatalf("ops %v, want %v", rc.ops, want)
	}
	for i := range want {
		if rc.ops[i] != want[i] {
			t.Fatalf("ops %v, want %v", rc.ops, want)
		}
	}
	if WriteTimeoutListener(nil, 0) != nil {
		t.Error("a zero timeout must leave the listener as it is")
	}
}

// Over a real socket: a peer that stops reading is cut once the buffers
// fill and a write waits past the deadline; a peer that reads steadily is
// never cut, however much is written.
func TestWriteTimeoutConnCutsAStalledPeer(t *testing.T) {
	pair := func(d time.Duration) (client, server net.Conn) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wl := WriteTimeoutListener(ln, d)
		defer wl.Close()
		client, err = net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = wl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		if _, ok := server.(*writeTimeoutConn); !ok {
			t.Fatalf("accepted %T, want a writeTimeoutConn", server)
		}
		return client, server
	}
	chunk := make([]byte, 1<<20)

	// Stalled: nothing reads.
	_, server := pair(200 * time.Millisecond)
	var werr error
	for i := 0; i < 256 && werr == nil; i++ { // at most 256 MiB: far past any socket buffer
		_, werr = server.Write(chunk)
	}
	if ne, ok := werr.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("writes to a peer that never reads ended with %v, want a timeout", werr)
	}

	// Steady: a peer that keeps reading gets 32 MiB in 1 MiB writes, each
	// sliced under its own deadline (ample here: a loaded machine may
	// pause the reader).
	client, server := pair(10 * time.Second)
	got := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, client)
		got <- n
	}()
	for range 32 {
		if _, err := server.Write(chunk); err != nil {
			t.Fatalf("write to a reading peer: %v", err)
		}
	}
	server.Close()
	if n := <-got; n != 32<<20 {
		t.Errorf("the reader got %d bytes, want %d", n, 32<<20)
	}
}

// socketRecorder is a SocketConn over a real TCP connection that counts
// the write deadlines set through it.
type socketRecorder struct {
	*net.TCPConn
	deadlines atomic.Int32
}

func (c *socketRecorder) Socket() *net.TCPConn { return c.TCPConn }

func (c *socketRecorder) SetWriteDeadline(t time.Time) error {
	c.deadlines.Add(1)
	return c.TCPConn.SetWriteDeadline(t)
}

// socketListener wraps each accepted connection in a socketRecorder.
type socketListener struct {
	net.Listener
	last *socketRecorder
}

func (l *socketListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.last = &socketRecorder{TCPConn: c.(*net.TCPConn)}
	return l.last, nil
}

// A write the socket takes at once is made without a deadline (none is
// needed: nothing can stall it); a write that fills the socket gets one for
// its rest, and the peer gets every byte in order.
func TestWriteTimeoutConnDeadlineOnlyWhenTheSocketIsFull(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := &socketListener{Listener: ln}
	wl := WriteTimeoutListener(sl, 10*time.Second)
	defer wl.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := wl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if wc := server.(*writeTimeoutConn); wc.raw == nil {
		t.Fatal("a SocketConn's socket was not found")
	}

	// Answers on an empty socket: no deadline, for one of several slices
	// too (a send buffer of at least 1 MiB holds the three).
	if err := sl.last.SetWriteBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*clientWriteSlice+10)
	for round, size := range []int{1024, 1024, 2*clientWriteSlice + 10} {
		answer := make([]byte, size)
		for i := range answer {
			answer[i] = byte(i*7 + round)
		}
		got := got[:size]
		if n, err := server.Write(answer); err != nil || n != len(answer) {
			t.Fatalf("round %d: wrote %d, %v", round, n, err)
		}
		if _, err := io.ReadFull(client, got); err != nil || string(got) != string(answer) {
			t.Fatalf("round %d: read %v, bytes equal %v", round, err, string(got) == string(answer))
		}
	}
	if n := sl.last.deadlines.Load(); n != 0 {
		t.Errorf("%d deadlines set for answers the socket took at once, want 0", n)
	}

	// A write larger than the socket's buffers, the peer not reading yet:
	// the rest of it goes under a deadline, and arrives whole, in order.
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i ^ i>>8 ^ i>>16)
	}
	done := make(chan error, 1)
	go func() {
		_, err := server.Write(big)
		done <- err
	}()
	// The peer reads nothing until the writer has met a full socket and
	// set a deadline for the rest.
	for sl.last.deadlines.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("a write of 16 MiB to a peer reading nothing ended (%v) without a deadline", err)
		case <-time.After(time.Millisecond):
		}
	}
	all := make([]byte, len(big))
	if _, err := io.ReadFull(client, all); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write to a reading peer: %v", err)
	}
	for i := range all {
		if all[i] != big[i] {
			t.Fatalf("byte %d is %d, want %d", i, all[i], big[i])
		}
	}

	// An empty write on a closed connection reports it, as before.
	server.Close()
	if _, err := server.Write(nil); err == nil {
		t.Error("an empty write on a closed connection succeeded")
	}
}
