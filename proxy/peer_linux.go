package proxy

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the client at the other end of conn has closed
// or reset the connection, without consuming a byte of what it may have sent
// (recv with MSG_PEEK|MSG_DONTWAIT). ok is false when conn gives no socket
// to look at.
func peerClosed(conn net.Conn) (closed, ok bool) {
	// A client on a TLS listener: its connection (tls.Conn) runs on the
	// socket, whose end shows there. Only the end is read from it: bytes
	// pending there are TLS records, whatever they hold.
	for range 4 {
		u, isTLS := conn.(interface{ NetConn() net.Conn })
		if !isTLS || u.NetConn() == conn {
			break
		}
		conn = u.NetConn()
	}
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
// the peer shut down its sending side or reset the connection, pending when
// bytes wait to be read. It polls the socket (poll(2) with a zero timeout)
// for POLLRDHUP, which Linux raises when the peer's FIN arrives even behind
// unread bytes: a TLS client's close_notify precedes its FIN, and a
// recv(MSG_PEEK) would see only the alert.
func peek(conn net.Conn) (closed, pending, ok bool) {
	sc, isSocket := conn.(syscall.Conn)
	if !isSocket {
		return false, false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false, false
	}
	err = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		for {
			_, perr := unix.Poll(fds, 0)
			if perr == unix.EINTR {
				continue
			}
			if perr != nil {
				return
			}
			break
		}
		ev := fds[0].Revents
		closed = ev&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		pending = ev&unix.POLLIN != 0
	})
	return closed, pending, err == nil
}
