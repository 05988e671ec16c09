package proxy

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// clientWriteSlice is the most bytes one write deadline covers: a larger
// write is made in slices of this size, each with its own deadline, so a
// large answer to a client that reads steadily is never cut for its size.
const clientWriteSlice = 64 << 10

// WriteTimeoutListener wraps ln so that every write to an accepted
// connection must finish within d of starting, in slices of at most 64 KiB:
// a client that does not accept 64 KiB within d (or the rest of an answer
// smaller than that) loses its connection. d <= 0 returns ln unchanged.
// On a TCP connection (or a SocketConn) a slice is first offered to the
// socket without waiting; only one it does not take whole gets a deadline,
// d from then, for its rest (an answer that fits the socket's buffer, as
// most do, sets none).
//
// fasthttp's own Server.WriteTimeout bounds a whole response from its first
// byte, which would cut a long stream read at full speed; and a deadline set
// by the handler's stream writer races with the server goroutine that
// really writes (fasthttp relays a body stream writer through a pipe). A
// deadline per write on the connection bounds the one thing that matters,
// the client's progress, for streamed and buffered answers alike. A
// streamed answer cut this way ends like one whose client left: the
// upstream request is cancelled and the caller charged what was streamed.
func WriteTimeoutListener(ln net.Listener, d time.Duration) net.Listener {
	if d <= 0 {
		return ln
	}
	return &writeTimeoutListener{Listener: ln, d: d}
}

type writeTimeoutListener struct {
	net.Listener
	d time.Duration
}

func (l *writeTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wc := &writeTimeoutConn{Conn: c, d: l.d}
	if tc := SocketOf(c); tc != nil {
		if raw, err := tc.SyscallConn(); err == nil {
			wc.raw = raw
			wc.try = wc.writeOnce // made once: a method value passed per write would allocate
		}
	}
	return wc, nil
}

// SocketConn is a connection whose Write hands its bytes, unchanged, to the
// TCP socket Socket returns (nil when there is none): a wrapper that counts
// or closes connections, never one that encodes what it writes (TLS goes
// around WriteTimeoutListener, not inside it). WriteTimeoutListener writes
// such a connection's bytes to the socket itself while the socket takes
// them at once.
type SocketConn interface {
	net.Conn
	Socket() *net.TCPConn
}

// SocketOf returns c itself when it is a *net.TCPConn, the socket a
// SocketConn gives, else nil.
func SocketOf(c net.Conn) *net.TCPConn {
	switch c := c.(type) {
	case *net.TCPConn:
		return c
	case SocketConn:
		return c.Socket()
	}
	return nil
}

// writeTimeoutConn sets a write deadline before each slice it writes,
// unless the socket takes the whole slice at once. Writes are not
// concurrent (fasthttp writes a connection from one goroutine at a time),
// so it holds no lock.
type writeTimeoutConn struct {
	net.Conn
	d time.Duration
	// raw is the socket under Conn when Conn writes to it unchanged
	// (SocketOf), else nil; try is c.writeOnce, for raw.Write.
	raw syscall.RawConn
	try func(fd uintptr) bool
	// next is the slice writeOnce writes; wrote, the bytes it took.
	next  []byte
	wrote int
}

// Write writes p in slices of at most clientWriteSlice. A slice the socket
// takes whole in one write(2) that does not wait needs no deadline: nothing
// can stall it. Any other (the socket full, an error, a deadline of an
// earlier write passed) gets a deadline d from now and is written, or
// finished, through Conn: a peer that does not accept the rest of the slice
// within d loses its connection. Setting the deadline is a runtime timer's
// change under a lock (some 650 instructions, a clock read besides), on
// every answer without this first try (callgrind, 1 KiB warm JSON c32).
func (c *writeTimeoutConn) Write(p []byte) (int, error) {
	n := 0
	for {
		end := min(len(p), n+clientWriteSlice)
		if c.raw != nil && end > n { // an empty write goes through Conn, which reports a closed connection
			n += c.writeNow(p[n:end])
			if n == len(p) {
				return n, nil
			}
			if n == end {
				continue
			}
		}
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.d)); err != nil {
			return n, err
		}
		m, err := c.Conn.Write(p[n:end])
		n += m
		if err != nil || n == len(p) {
			return n, err
		}
	}
}

// writeNow writes what of p the socket takes at once, without waiting and
// without a deadline, and returns its length (0 after any error: the
// write through Conn that follows meets it again and returns it).
func (c *writeTimeoutConn) writeNow(p []byte) int {
	c.next, c.wrote = p, 0
	err := c.raw.Write(c.try)
	c.next = nil
	if err != nil {
		return 0
	}
	return c.wrote
}

// writeOnce is raw.Write's function: one write(2) of c.next, never asking
// to wait (true), so that the socket's write deadline, whatever an earlier
// write left, never applies to it.
func (c *writeTimeoutConn) writeOnce(fd uintptr) bool {
	m, err := syscall.Write(int(fd), c.next)
	if err == nil && m > 0 {
		c.wrote = m
	}
	return true
}

// CloseWrite shuts the writing side of the socket underneath, for a
// lingering close.
func (c *writeTimeoutConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return c.Conn.Close()
	}
	return cw.CloseWrite()
}

// SyscallConn gives the socket underneath, for peerClosed.
func (c *writeTimeoutConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("proxy: connection has no socket")
	}
	return sc.SyscallConn()
}
