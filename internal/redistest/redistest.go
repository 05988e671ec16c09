// Package redistest starts real redis-server processes for tests: one
// standalone server, or a Redis Cluster of several masters (with replicas,
// if asked), each on free loopback ports with its own temporary directory
// and no persistence, and stopped when the test ends. A test can kill a
// node (SIGKILL, as a crash), restart it, and wait for a cluster to fail
// over (cluster.go). Tests that do not can share one server, or one
// cluster, per test binary instead, reset between tests (shared.go).
// Tests never touch a Redis they did not start (in particular not the one
// on 6379).
//
// When redis-server (or $REDIS_SERVER) cannot be found, Start,
// StartCluster and StartClusterWith skip the test, unless the environment
// has CI=true, in which case they fail it: CI must run the real-Redis
// tests.
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
	// owner is the shared server this one stands for in test t (view), nil
	// for a server of t's own.
	owner *Server

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

// Running reports whether the server's process runs: it was started and
// not killed since (or restarted).
func (s *Server) Running() bool {
	if s.owner != nil {
		return s.owner.Running()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// admin returns a new client of the server for the harness's own commands,
// which the caller closes: one dial attempt, no retries, so that a node
// that is down fails the command at once.
func (s *Server) admin() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 1,
	})
}

// Kill stops the server at once with SIGKILL (as a crash would) and waits
// for it to exit. Its data is lost: there is no persistence. Killing a
// stopped server does nothing. On a shared server (Shared, SharedCluster)
// it fails the test instead.
func (s *Server) Kill() {
	if s.owner != nil {
		s.t.Helper()
		s.t.Fatal(sharedNote(s))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart kills the server if it runs, starts it again on the same port and
// directory (a cluster node keeps its nodes.conf, so it rejoins its
// cluster), and waits until it answers PING. It fails the test when the
// server does not come back, and on a shared server (Shared,
// SharedCluster).
func (s *Server) Restart() {
	s.t.Helper()
	if s.owner != nil {
		s.t.Fatal(sharedNote(s))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
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
			// Another process may have taken the port between freePort and
			// the bind (tests of other packages, other runs start servers
			// too): the answer must come from this process.
			if pid, err := serverPID(s.Addr()); err != nil || pid != cmd.Process.Pid {
				s.kill()
				return fmt.Errorf("port %d is answered by another redis-server (pid %d, %v), not ours (pid %d)", s.port, pid, err, cmd.Process.Pid)
			}
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

// serverPID is the process_id the Redis at addr reports (INFO server).
func serverPID(addr string) (int, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, PoolSize: 1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := cl.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(lineValue(info, "process_id"))
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
