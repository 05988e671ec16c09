//go:build !linux

package proxy

import "net"

// peerClosed cannot look at the socket on this platform: a departed client
// is noticed at the next write instead.
func peerClosed(net.Conn) (closed, ok bool) { return false, false }

// idlePeek cannot look at the socket on this platform: an idle upstream
// connection the upstream closed is found unusable only when a request
// fails on it, and that request is not retried.
type idlePeek struct{}

// newIdlePeek returns nil: nothing to look at on this platform.
func newIdlePeek(net.Conn) *idlePeek { return nil }

// unusable reports ok false: the socket is not looked at.
func (*idlePeek) unusable() (unusable, ok bool) { return false, false }

// PeerClosed reports ok false: the socket cannot be looked at on this
// platform (see the Linux build for what it does there).
func PeerClosed(conn net.Conn) (closed, ok bool) { return peerClosed(conn) }
