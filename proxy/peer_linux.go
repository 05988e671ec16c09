package proxy

import (
	"net"
	"syscall"
	"unsafe"

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

// idlePeek reports whether a connection with no exchange under way has
// anything to read: the end of the stream, an error, or bytes nobody asked
// for (an HTTP server's goodbye, a TLS close_notify); any of them means the
// peer is done with it, and nothing is consumed. It is made for one
// connection looked at again and again (an upstream connection, before each
// request written on it once it is reused): the socket's RawConn, the poll
// argument and the function run on the descriptor are made once, so that a
// look allocates nothing; it makes the same poll(2) as peek. Not safe for concurrent use: a connection is
// looked at by the one request that holds it.
type idlePeek struct {
	raw  syscall.RawConn
	fds  [1]unix.PollFd
	look func(fd uintptr) // polls fd into fds[0].Revents, or sets failed
	// failed: the last poll failed (EINTR aside).
	failed bool
}

// newIdlePeek returns the idlePeek of conn's socket; nil when conn gives no
// socket to look at (a nil *idlePeek answers ok false).
func newIdlePeek(conn net.Conn) *idlePeek {
	sc, isSocket := conn.(syscall.Conn)
	if !isSocket {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &idlePeek{raw: raw}
	p.look = func(fd uintptr) {
		p.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}
		p.failed = pollRaw(&p.fds[0]) != nil
	}
	return p
}

// unusable reports whether p's socket is done with (see idlePeek); ok is
// false when there is no socket to look at.
func (p *idlePeek) unusable() (unusable, ok bool) {
	if p == nil {
		return false, false
	}
	if err := p.raw.Control(p.look); err != nil || p.failed {
		return false, err == nil
	}
	ev := p.fds[0].Revents
	return ev&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLIN) != 0, true
}

// zeroTimeout is ppoll's timeout for a look that never waits.
var zeroTimeout unix.Timespec

// pollRaw polls the one fd of *fd with a zero timeout, again after EINTR,
// as pollNow does but without telling the Go scheduler of a system call
// (RawSyscall6): a poll that cannot block takes a fraction of a
// microsecond, which a blocking call's handover to the scheduler (entering
// and leaving the syscall state, about as much again) only adds to. It is
// the one poll(2) made on every request sent on a reused upstream
// connection.
func pollRaw(fd *unix.PollFd) error {
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(fd)), 1, uintptr(unsafe.Pointer(&zeroTimeout)), 0, 0, 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// pollNow polls fds with a zero timeout, again after EINTR.
func pollNow(fds []unix.PollFd) error {
	for {
		_, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err
		}
	}
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
		if pollNow(fds) != nil {
			return
		}
		ev := fds[0].Revents
		closed = ev&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		pending = ev&unix.POLLIN != 0
	})
	return closed, pending, err == nil
}

// PeerClosed reports whether the client at the other end of conn (a
// server's connection, plain or TLS, or a wrapper that gives its socket
// through SyscallConn) has closed or reset it, without consuming a byte of
// what it may have sent. ok is false when conn gives no socket to look at.
// The admin listener's usage read uses it to stop once its caller left.
func PeerClosed(conn net.Conn) (closed, ok bool) { return peerClosed(conn) }
