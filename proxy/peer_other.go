//go:build !linux

package proxy

import "net"

// peerClosed cannot look at the socket on this platform: a departed client
// is noticed at the next write instead.
func peerClosed(net.Conn) (closed, ok bool) { return false, false }

// idleUnusable cannot look at the socket on this platform: an idle
// upstream connection the upstream closed is found unusable only when a
// request fails on it, and that request is not retried.
func idleUnusable(net.Conn) (unusable, ok bool) { return false, false }
