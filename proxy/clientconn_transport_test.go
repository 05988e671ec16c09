package proxy

import (
	"io"
	"net"
	"strconv"
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
