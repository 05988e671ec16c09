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
	sc, isSocket := conn.(syscall.Conn)
	if !isSocket {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == nil && n == 0: // orderly shutdown: EOF
			closed = true
		case rerr == nil, errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EINTR):
		default: // ECONNRESET and the like
			closed = true
		}
		return true // never wait for readiness
	})
	return closed, err == nil
}
