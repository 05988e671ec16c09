package loadbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCluster is a Redis Cluster of masters only that the benchmark
// started: each node a redis-server of its own (no persistence, a free
// loopback port, its own directory), the 16384 slots split evenly.
type redisCluster struct {
	nodes []*redisServer
}

// startCluster starts masters cluster-enabled redis-servers, assigns them
// equal ranges of the slots, joins them (what `redis-cli --cluster create
// --cluster-replicas 0` does: CLUSTER ADDSLOTS, SET-CONFIG-EPOCH, MEET) and
// waits until every node reports cluster_state:ok and knows the others.
// Errors: errNoRedis, a node that does not start, a cluster that does not
// form within startTimeout.
func startCluster(masters int) (*redisCluster, error) {
	c := &redisCluster{}
	for range masters {
		s, err := startRedisWith("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "yes")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	clients := c.clients()
	defer closeAll(clients)
	for i, cl := range clients {
		from, to := i*16384/masters, (i+1)*16384/masters
		slots := make([]int, 0, to-from)
		for s := from; s < to; s++ {
			slots = append(slots, s)
		}
		if err := cl.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			c.stop()
			return nil, fmt.Errorf("loadbench: cluster addslots: %w", err)
		}
		if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			c.stop()
			return nil, fmt.Errorf("loadbench: cluster set-config-epoch: %w", err)
		}
	}
	for _, n := range c.nodes[1:] {
		host, port, _ := strings.Cut(n.Addr, ":")
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			c.stop()
			return nil, fmt.Errorf("loadbench: cluster meet: %w", err)
		}
	}
	want := fmt.Sprintf("cluster_known_nodes:%d\r\n", masters)
	for _, cl := range clients {
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				c.stop()
				return nil, fmt.Errorf("loadbench: the cluster did not form within %v: %s %v", startTimeout, info, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return c, nil
}

// addrs are the nodes' host:port.
func (c *redisCluster) addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr
	}
	return a
}

// clients returns a plain client of each node, in node order; the caller
// closes them.
func (c *redisCluster) clients() []*redis.Client {
	cls := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		cls[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
	}
	return cls
}

func (c *redisCluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

func closeAll(cls []*redis.Client) {
	for _, cl := range cls {
		cl.Close()
	}
}

// commandStats is what `INFO commandstats` says of one node since its last
// CONFIG RESETSTAT: per command, the calls and the microseconds of CPU they
// took (commands a script runs are counted under their own names too).
type commandStats map[string]struct{ calls, usec int64 }

// scriptCommands are the commands that run a script: one round trip each
// from a client (llmguard never sends a script's commands itself).
var scriptCommands = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"}

// readCommandStats reads INFO commandstats of one node. Errors: the call
// fails.
func readCommandStats(ctx context.Context, cl *redis.Client) (commandStats, error) {
	text, err := cl.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(text)
}

// parseCommandStats parses INFO commandstats lines,
// "cmdstat_get:calls=3,usec=12,usec_per_call=4.00,…". Errors: a cmdstat
// line without calls or usec.
func parseCommandStats(text string) (commandStats, error) {
	st := commandStats{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		var calls, usec int64 = -1, -1
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if calls < 0 || usec < 0 {
			return nil, fmt.Errorf("loadbench: commandstats line %q", line)
		}
		st[strings.ToLower(cmd)] = struct{ calls, usec int64 }{calls, usec}
	}
	return st, nil
}

// totals sums st: every command's calls, the script calls among them, and
// the CPU microseconds; the benchmark's own commands (CONFIG RESETSTAT,
// INFO) are left out.
func (st commandStats) totals() (calls, scripts, usec int64) {
	for cmd, s := range st {
		if cmd == "config|resetstat" || cmd == "config" || cmd == "info" {
			continue
		}
		calls += s.calls
		usec += s.usec
		for _, sc := range scriptCommands {
			if cmd == sc {
				scripts += s.calls
			}
		}
	}
	return calls, scripts, usec
}

// startRedisWith starts redis-server as startRedis does, with extra
// arguments.
func startRedisWith(extra ...string) (*redisServer, error) {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, errNoRedis
	}
	dir, err := os.MkdirTemp("", "llmguard-bench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		s := &redisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, exited: make(chan struct{})}
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", "redis.log", "--daemonize", "no"}, extra...)
		s.cmd = exec.Command(bin, args...)
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
		s.stop()
	}
	os.RemoveAll(dir)
	if lastErr == nil {
		lastErr = errors.New("no free port")
	}
	return nil, fmt.Errorf("loadbench: redis-server did not start: %w", lastErr)
}
