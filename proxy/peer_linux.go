package proxy

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client at the other end of conn has closed
// or reset the connection, without consuming a byte of what it may have sent
// (recv with MSG_PEEK|MSG_DONTWAIT). ok is false when conn gives no socket
// to look at.
func peerClosed(conn net.Conn) (closed, ok bool) {
	closed, _, ok = peek(conn)
	return closed, ok
}

// idleUnusable reports whether a connection with no exchange under way has
// anything to read: the end of the stream, an error, or bytes nobody asked
// for (an HTTP server's goodbye, a TLS close_notify). Any of them means the
// peer is done with it. Nothing is consumed. ok is false when conn gives no
// socket to look at.
func idleUnusable(conn net.Conn) (unusable, ok bool) {
	closed, pending, ok := peek(conn)
	return closed || pending, ok
}

// peek looks at conn's socket without consuming or waiting: closed when
// the peer shut down or reset it, pending when bytes wait to be read.
func peek(conn net.Conn) (closed, pending, ok bool) {
	sc, isSocket := conn.(syscall.Conn)
	if !isSocket {
		return false, false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false, false
	}
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == nil && n == 0: // orderly shutdown: EOF
			closed = true
		case rerr == nil:
			pending = true
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
		default: // ECONNRESET and the like
			closed = true
		}
		return true // never wait for readiness
	})
	return closed, pending, err == nil
}
