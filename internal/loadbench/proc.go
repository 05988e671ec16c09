package loadbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// startTimeout bounds how long a child or redis-server may take to start:
// a guard against a hung child, not a measure. It is generous because a
// child built with -race on a loaded 2-core machine took over 30 s to print
// its address; a child that exits is noticed at once, not at the bound.
const startTimeout = 3 * time.Minute

// child is a running child process (see [Child]). Its methods are safe for
// concurrent use.
type child struct {
	role  string
	URL   string // its proxy or upstream base URL
	Admin string // llmguard's admin base URL, "" for other roles

	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	exited chan struct{}
}

// startChild runs exe with "child role args…" and waits for the address it
// prints. Errors: the process cannot start, exits, or prints no address
// within startTimeout.
func startChild(exe, role string, args ...string) (*child, error) {
	cmd := exec.Command(exe, append([]string{"child", role}, args...)...)
	cmd.Stderr = os.Stderr
	dieWithParent(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadbench: start %s: %w", role, err)
	}
	c := &child{role: role, cmd: cmd, in: in, out: bufio.NewReader(out), exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	want := 1
	if role == RoleLLMGuard {
		want = 2
	}
	got := make(chan error, 1)
	go func() {
		for range want {
			line, err := c.out.ReadString('\n')
			if err != nil {
				got <- fmt.Errorf("loadbench: %s exited before printing its address", role)
				return
			}
			k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
			switch k {
			case "listening":
				c.URL = v
			case "admin":
				c.Admin = v
			}
		}
		got <- nil
	}()
	select {
	case err = <-got:
	case <-time.After(startTimeout):
		err = fmt.Errorf("loadbench: %s printed no address within %v", role, startTimeout)
	}
	if err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// cpu asks the child for its CPU time so far (user + system), in
// microseconds. Errors: the child has exited or answers garbage.
func (c *child) cpu() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, "cpu\n"); err != nil {
		return 0, fmt.Errorf("loadbench: %s: %w", c.role, err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("loadbench: %s: %w", c.role, err)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(line), "cpu ")
	if !ok {
		return 0, fmt.Errorf("loadbench: %s answered %q to cpu", c.role, line)
	}
	return strconv.ParseInt(v, 10, 64)
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop closes the child's input, which ends it, and kills it if it has
// not exited within a few seconds.
func (c *child) stop() {
	c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// redisServer is a redis-server the benchmark started: no persistence, a
// free loopback port, its own temporary directory.
type redisServer struct {
	Addr   string
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	// callgrind is set when the server runs under valgrind's callgrind,
	// which counts the instructions it executes (see instructions).
	callgrind bool
}

// errNoRedis is returned when redis-server cannot be found.
var errNoRedis = errors.New("loadbench: redis-server not found ($REDIS_SERVER or on $PATH): install Redis, or leave the redis target out (-targets direct,bare,memory)")

// redisOptions says how startRedis starts a server.
type redisOptions struct {
	// cluster wants the cluster bus port (port + 10000) free too.
	cluster bool
	// callgrind runs the server under valgrind --tool=callgrind.
	callgrind bool
	// extra are more redis-server arguments.
	extra []string
}

// startRedis starts redis-server ($REDIS_SERVER, else on $PATH) with
// --save "" --appendonly no and o's extra arguments on a free loopback port
// (under valgrind's callgrind when o says so), and waits until it answers
// PING. Errors: errNoRedis, errNoValgrind, or a server that does not start.
func startRedis(o redisOptions) (*redisServer, error) {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, errNoRedis
	}
	var valgrind string
	if o.callgrind {
		if valgrind, err = exec.LookPath("valgrind"); err != nil {
			return nil, errNoValgrind
		}
		if _, err := exec.LookPath("callgrind_control"); err != nil {
			return nil, errNoValgrind
		}
	}
	var lastErr error
	for range 5 {
		dir, err := os.MkdirTemp("", "llmguard-bench-redis-")
		if err != nil {
			return nil, err
		}
		port, err := freePort()
		if err == nil && o.cluster {
			err = busFree(port)
		}
		if err != nil {
			os.RemoveAll(dir)
			lastErr = err
			continue
		}
		s := &redisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, exited: make(chan struct{}), callgrind: o.callgrind}
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", "redis.log", "--daemonize", "no"}, o.extra...)
		if o.callgrind && !o.cluster {
			// Redis's cron (hz 10 by default) runs by the clock, and under
			// valgrind's slowdown on a loaded machine it added up to 80k
			// instructions to each of a short run's PINGs: at hz 1 the
			// counts are the requests'. A cluster keeps the default, its
			// bus's pings and failure detection run from the cron.
			args = append(args, "--hz", "1")
		}
		if o.callgrind {
			s.cmd = exec.Command(valgrind, append([]string{"--tool=callgrind", "--callgrind-out-file=" + dir + "/cg.%p", bin}, args...)...)
		} else {
			s.cmd = exec.Command(bin, args...)
		}
		s.cmd.Dir = dir
		dieWithParent(s.cmd)
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("loadbench: start redis-server: %w", err)
		}
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
		if lastErr = s.waitPing(); lastErr == nil {
			return s, nil
		}
		s.stop() // removes dir
	}
	return nil, fmt.Errorf("loadbench: redis-server did not start: %w", lastErr)
}

func (s *redisServer) waitPing() error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(s.dir + "/redis.log")
			return fmt.Errorf("exited: %s", strings.TrimSpace(string(b)))
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within %v", startTimeout)
}

// pid is the server's process id.
func (s *redisServer) pid() int { return s.cmd.Process.Pid }

// stop kills the server and removes its directory.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	os.RemoveAll(s.dir)
}
