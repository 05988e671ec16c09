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
	return &writeTimeoutConn{Conn: c, d: l.d}, nil
}

// writeTimeoutConn sets a write deadline before each slice it writes.
// Writes are not concurrent (fasthttp writes a connection from one
// goroutine at a time), so it holds no lock.
type writeTimeoutConn struct {
	net.Conn
	d time.Duration
}

func (c *writeTimeoutConn) Write(p []byte) (int, error) {
	n := 0
	for {
		end := min(len(p), n+clientWriteSlice)
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
