// Package redistest starts real redis-server processes for tests: one
// standalone server, or a Redis Cluster of several masters, each on free
// loopback ports with its own temporary directory and no persistence, and
// stopped when the test ends. Tests never touch a Redis they did not start
// (in particular not the one on 6379).
//
// When redis-server (or $REDIS_SERVER) cannot be found, Start and
// StartCluster skip the test, unless the environment has CI=true, in which
// case they fail it: CI must run the real-Redis tests.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redisprobe"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to answer PING, and a
// cluster to reach cluster_state:ok.
const startTimeout = 15 * time.Second

// Server is one redis-server process owned by a test. Its methods are safe
// for concurrent use, and must not be called after the test has ended.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a standalone redis-server on a free loopback port with
// `--save "" --appendonly no` in a temporary directory of its own, waits
// until it answers PING, and has t.Cleanup stop it. It skips t when
// redis-server is missing (fails it when CI=true) and fails t when the
// server does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, lookBinary(t), nil)
}

// Addr returns the server's "127.0.0.1:port".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Client returns a new client of the server, closed at the end of the test.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Kill stops the server at once with SIGKILL (as a crash would) and waits
// for it to exit. Its data is lost: there is no persistence. Killing a
// stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart kills the server if it runs, starts it again on the same port and
// directory (a cluster node keeps its nodes.conf, so it rejoins its
// cluster), and waits until it answers PING. It fails the test when the
// server does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
}

// Cluster is a Redis Cluster of masters only, owned by a test.
type Cluster struct {
	// Nodes are the masters, which together serve all 16384 slots.
	Nodes []*Server
}

// StartCluster starts masters redis-server nodes with cluster mode on, each
// as Start would, assigns them equal ranges of the 16384 slots, joins them
// (CLUSTER ADDSLOTS, SET-CONFIG-EPOCH, MEET: what `redis-cli --cluster
// create --cluster-replicas 0` does) and waits until every node reports
// cluster_state:ok and knows every other. It skips and fails t as Start does.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: a cluster needs at least one master, not %d", masters)
	}
	bin := lookBinary(t)
	c := &Cluster{}
	for range masters {
		c.Nodes = append(c.Nodes, start(t, bin, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--cluster-require-full-coverage", "yes",
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	clients := make([]*redis.Client, masters)
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer clients[i].Close()
	}
	for i, cl := range clients {
		from, to := i*16384/masters, (i+1)*16384/masters
		slots := make([]int, 0, to-from)
		for s := from; s < to; s++ {
			slots = append(slots, s)
		}
		if err := cl.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			t.Fatalf("redistest: cluster addslots on %s: %v", c.Nodes[i].Addr(), err)
		}
		if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			t.Fatalf("redistest: cluster set-config-epoch on %s: %v", c.Nodes[i].Addr(), err)
		}
	}
	for _, n := range c.Nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.port)).Err(); err != nil {
			t.Fatalf("redistest: cluster meet %s: %v", n.Addr(), err)
		}
	}
	for i, cl := range clients {
		if err := waitClusterOK(ctx, cl, masters); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", c.Nodes[i].Addr(), err)
		}
	}
	return c
}

// Addrs returns every node's "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Client returns a new cluster client of the cluster, closed at the end of
// the test.
func (c *Cluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.Nodes[0].t.Cleanup(func() { cl.Close() })
	return cl
}

func waitClusterOK(ctx context.Context, cl *redis.Client, masters int) error {
	var last string
	for {
		info, err := cl.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r\n", masters)) {
			return nil
		}
		last = fmt.Sprint(info, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ok after %v: %s", startTimeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lookBinary finds redis-server ($REDIS_SERVER, else on $PATH), or skips t
// (fails it when CI=true).
func lookBinary(t testing.TB) string {
	t.Helper()
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redistest: %v (CI=true: the real-Redis tests must run)", err)
		}
		t.Skipf("redistest: %v: skipping the real-Redis test", err)
	}
	return bin
}

// start launches one server on a free port, trying a few ports in case
// another process takes the chosen one first.
func start(t testing.TB, bin string, extra []string) *Server {
	t.Helper()
	var err error
	for range 5 {
		s := &Server{t: t, bin: bin, dir: t.TempDir(), args: extra}
		if s.port, err = freePort(); err != nil {
			continue
		}
		s.mu.Lock()
		err = s.launch()
		s.mu.Unlock()
		if err == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redistest: start %s: %v", bin, err)
	return nil
}

// launch starts the process and waits until it answers PING. s.mu is held.
func (s *Server) launch() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "redis.log",
		"--daemonize", "no",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, s.logTail())
		default:
		}
		if ping(s.Addr()) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("redis-server on port %d did not answer PING within %v: %s", s.port, startTimeout, s.logTail())
}

// kill stops the process, if any, and waits for it. s.mu is held.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// ping sends PING over a fresh connection and expects +PONG.
func ping(addr string) error { return redisprobe.Ping(addr, 500*time.Millisecond) }

// freePort returns a loopback port that is free now, with its cluster bus
// port (port + 10000) free too, and neither is Redis's default 6379.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 || port == 6379 || port == 16379 {
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair found")
}
