package redistest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A shared server (or cluster) is started once per test binary, by the
// first test that asks for it, and handed to every later test after a reset
// that leaves it as a fresh one would be for what tests can see: no keys,
// no scripts, no function libraries, zeroed INFO stats. Starting a
// redis-server costs tens of milliseconds and a cluster seconds (its nodes
// must gossip until each reports cluster_state:ok); a package with dozens
// of Redis tests spent most of its time there.
//
// Sharing is for tests that neither stop, block nor reconfigure the server
// (Kill, Restart, DEBUG SLEEP, a script that spins, CONFIG SET, CLIENT
// PAUSE, HoldFailover): those start their own with Start or
// StartClusterWith. Tests on a shared server must not run in parallel with
// each other (t.Parallel): each reset flushes everything.
var shared struct {
	mu       sync.Mutex
	server   *Server
	clusters map[int]*Cluster // by number of masters
	dirs     []string
}

// Shared returns the test binary's shared standalone redis-server, started
// as Start would on first use, after resetting it (FLUSHALL, SCRIPT FLUSH,
// FUNCTION FLUSH, CONFIG RESETSTAT). The returned *Server is a view for t:
// Client and Addr work as on a server of t's own; Kill and Restart fail t.
// It skips or fails t as Start does when redis-server is missing, and fails
// t when the server does not start or does not take the reset. The server
// runs until StopShared (or the test binary's exit).
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil || !shared.server.Running() {
		s, err := startShared(bin, nil)
		if err != nil {
			t.Fatalf("redistest: start the shared %s: %v", bin, err)
		}
		shared.server = s
	}
	if err := reset(shared.server.Addr()); err != nil {
		t.Fatalf("redistest: reset the shared server %s: %v", shared.server.Addr(), err)
	}
	return shared.server.view(t)
}

// SharedCluster returns the test binary's shared Redis Cluster of masters
// masters without replicas, started as StartCluster would on first use,
// after resetting every master as Shared does. Its Nodes are views for t:
// the Cluster's methods work as on a cluster of t's own; a node's Kill and
// Restart fail t. It fails t as StartCluster does.
func SharedCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: a cluster needs at least one master, not %d", masters)
	}
	bin := lookBinary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	c := shared.clusters[masters]
	if c != nil && len(c.running()) != len(c.Nodes) {
		c = nil // a node died: start a new cluster
	}
	if c == nil {
		var err error
		if c, err = startSharedCluster(bin, masters); err != nil {
			t.Fatalf("redistest: start the shared cluster of %d masters: %v", masters, err)
		}
		if shared.clusters == nil {
			shared.clusters = map[int]*Cluster{}
		}
		shared.clusters[masters] = c
	}
	view := &Cluster{t: t, masters: c.masters}
	for _, n := range c.Nodes {
		if err := reset(n.Addr()); err != nil {
			t.Fatalf("redistest: reset the shared cluster node %s: %v", n.Addr(), err)
		}
		view.Nodes = append(view.Nodes, n.view(t))
	}
	return view
}

// StopShared kills the shared server and clusters, if any were started, and
// removes their directories. A package's TestMain calls it after m.Run.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		shared.server.Kill()
		shared.server = nil
	}
	for _, c := range shared.clusters {
		for _, n := range c.Nodes {
			n.Kill()
		}
	}
	shared.clusters = nil
	for _, d := range shared.dirs {
		os.RemoveAll(d)
	}
	shared.dirs = nil
}

// view returns a Server that stands for the shared s in test t.
func (s *Server) view(t testing.TB) *Server {
	return &Server{t: t, bin: s.bin, dir: s.dir, port: s.port, args: s.args, owner: s}
}

// startShared starts a server that belongs to no test (start does the same
// for a test). shared.mu is held.
func startShared(bin string, extra []string) (*Server, error) {
	var err error
	for range 5 {
		var dir string
		if dir, err = os.MkdirTemp("", "redistest-shared-"); err != nil {
			return nil, err
		}
		shared.dirs = append(shared.dirs, dir)
		s := &Server{bin: bin, dir: dir, args: extra}
		if s.port, err = freePort(); err != nil {
			continue
		}
		s.mu.Lock()
		err = s.launch()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
	}
	return nil, err
}

// startSharedCluster starts and joins a cluster of masters masters, as
// StartCluster does, on servers that belong to no test. shared.mu is held.
func startSharedCluster(bin string, masters int) (*Cluster, error) {
	c := &Cluster{masters: masters}
	fail := func(err error) (*Cluster, error) {
		for _, n := range c.Nodes {
			n.Kill()
		}
		return nil, err
	}
	for range masters {
		n, err := startShared(bin, clusterArgs(ClusterOptions{Masters: masters, NodeTimeout: defaultNodeTimeout}))
		if err != nil {
			return fail(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.join(ClusterOptions{Masters: masters}); err != nil {
		return fail(err)
	}
	return c, nil
}

// reset brings the server at addr back to what a fresh one shows: no keys
// (FLUSHALL), no cached scripts (SCRIPT FLUSH), no function libraries
// (FUNCTION FLUSH), INFO commandstats and the other counters at zero
// (CONFIG RESETSTAT).
func reset(addr string) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, cmd := range [][]any{
		{"flushall", "sync"},
		{"script", "flush", "sync"},
		{"function", "flush", "sync"},
		{"config", "resetstat"},
	} {
		if err := cl.Do(ctx, cmd...).Err(); err != nil {
			return fmt.Errorf("%v: %w", cmd, err)
		}
	}
	return nil
}

// sharedNote is the message of a Kill or Restart of a shared server.
func sharedNote(s *Server) string {
	return "redistest: " + s.Addr() + " (port " + strconv.Itoa(s.port) + ") is shared between tests: a test that kills or restarts a server starts its own (Start, StartCluster)"
}
