package app

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// adminConns caps the admin listener's open connections at max, and makes
// room for a new connection by closing an old one rather than refusing the
// new one: of the peer (remote IP) holding the most connections, its
// oldest. Refusing the newest, as fasthttp's Server.Concurrency does, let
// any client that could reach the admin listener keep /healthz, /readyz
// and /metrics answering 503 with max connections that each sent half a
// request, opened again as the read timeout closed them: a liveness probe
// then restarts a healthy proxy. Evicting the oldest of the largest peer
// lets a probe in whatever the others hold; it is closed in turn only after
// another max connections arrived before it sent its request, and never
// for a peer holding fewer connections than another. A connection evicted
// mid-request (an admin API call, the oldest of the largest peer) is cut:
// the cap is reached only under such a flood. The zero value is not
// usable: make one with newAdminConns. Safe for concurrent use.
type adminConns struct {
	max int
	log *slog.Logger

	mu     sync.Mutex
	open   int
	byPeer map[netip.Addr][]*adminConn // each peer's open connections, oldest first

	evicted  atomic.Uint64
	loggedAt atomic.Int64 // Unix nanoseconds of the last eviction logged
}

// newAdminConns caps connections at limit (at least 1).
func newAdminConns(limit int, log *slog.Logger) *adminConns {
	return &adminConns{max: max(1, limit), log: log, byPeer: make(map[netip.Addr][]*adminConn)}
}

// listen wraps ln: every connection it accepts is counted, and one past
// the cap closes the oldest connection of the largest peer first.
func (a *adminConns) listen(ln net.Listener) net.Listener {
	return &adminListener{Listener: ln, a: a}
}

type adminListener struct {
	net.Listener
	a *adminConns
}

func (l *adminListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.a.add(conn), nil
}

// add counts conn, evicting a connection first when max are open.
func (a *adminConns) add(conn net.Conn) *adminConn {
	c := &adminConn{Conn: conn, a: a, peer: peerOf(conn)}
	a.mu.Lock()
	var victim *adminConn
	if a.open >= a.max {
		victim = a.victimLocked()
		a.removeLocked(victim)
	}
	a.byPeer[c.peer] = append(a.byPeer[c.peer], c)
	a.open++
	a.mu.Unlock()
	if victim != nil {
		victim.Conn.Close() // its server goroutine's read fails and ends; its Close finds it gone
		a.evicted.Add(1)
		now := time.Now().UnixNano()
		if last := a.loggedAt.Load(); now-last >= int64(10*time.Second) && a.loggedAt.CompareAndSwap(last, now) {
			a.log.Warn("admin listener full: closed the oldest connection of the peer holding the most",
				"max_connections", a.max, "peer", victim.peer.String(), "evicted_total", a.evicted.Load())
		}
	}
	return c
}

// victimLocked is the oldest connection of the peer holding the most (the
// first such peer found on a tie). a.open > 0.
func (a *adminConns) victimLocked() *adminConn {
	var most []*adminConn
	for _, cs := range a.byPeer {
		if len(cs) > len(most) {
			most = cs
		}
	}
	return most[0]
}

// removeLocked forgets c; it reports whether c was still counted.
func (a *adminConns) removeLocked(c *adminConn) bool {
	cs := a.byPeer[c.peer]
	i := slices.Index(cs, c)
	if i < 0 {
		return false
	}
	if len(cs) == 1 {
		delete(a.byPeer, c.peer)
	} else {
		a.byPeer[c.peer] = slices.Delete(cs, i, i+1)
	}
	a.open--
	return true
}

// peerOf is conn's remote IP (IPv4-mapped addresses unmapped), or the zero
// Addr for a connection without one (an in-memory listener's).
func peerOf(conn net.Conn) netip.Addr {
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// adminConn gives its place back when closed, unless it was evicted.
type adminConn struct {
	net.Conn
	a    *adminConns
	peer netip.Addr
}

func (c *adminConn) Close() error {
	c.a.mu.Lock()
	c.a.removeLocked(c)
	c.a.mu.Unlock()
	return c.Conn.Close()
}

// SyscallConn gives the socket underneath, for the look at a departed
// client (proxy.PeerClosed) of a usage read.
func (c *adminConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("app: admin connection has no socket")
	}
	return sc.SyscallConn()
}
