package loadbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCluster is a Redis Cluster of masters only that the benchmark
// started, each a redisServer with cluster mode on.
type redisCluster struct {
	nodes []*redisServer
}

// startCluster starts masters redis-servers with cluster mode on (under
// callgrind when asked), gives
// them equal ranges of the 16384 slots, joins them (CLUSTER ADDSLOTSRANGE,
// SET-CONFIG-EPOCH, MEET: what `redis-cli --cluster create
// --cluster-replicas 0` does) and waits until every node reports
// cluster_state:ok and knows every other. Errors: startRedis's, a command
// refused, or a cluster not ok within startTimeout.
func startCluster(masters int, callgrind bool) (*redisCluster, error) {
	c := &redisCluster{}
	for range masters {
		s, err := startRedis(redisOptions{cluster: true, callgrind: callgrind, extra: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "yes"}})
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.join(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *redisCluster) join() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	masters := len(c.nodes)
	clients := make([]*redis.Client, masters)
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer clients[i].Close()
	}
	for i, cl := range clients {
		from, to := i*16384/masters, (i+1)*16384/masters-1
		if err := cl.Do(ctx, "cluster", "addslotsrange", from, to).Err(); err != nil {
			return fmt.Errorf("loadbench: cluster addslotsrange on %s: %w", c.nodes[i].Addr, err)
		}
		if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return fmt.Errorf("loadbench: cluster set-config-epoch on %s: %w", c.nodes[i].Addr, err)
		}
	}
	for _, n := range c.nodes[1:] {
		host, port, _ := net.SplitHostPort(n.Addr)
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("loadbench: cluster meet %s: %w", n.Addr, err)
		}
	}
	want := "cluster_known_nodes:" + strconv.Itoa(masters) + "\r\n"
	for i, cl := range clients {
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("loadbench: cluster node %s not ok within %v: %v %v", c.nodes[i].Addr, startTimeout, info, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// addrs returns every node's host:port.
func (c *redisCluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr
	}
	return out
}

// stop stops every node.
func (c *redisCluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

// busFree reports an error when port's cluster bus port (port + 10000) is
// taken or out of range.
func busFree(port int) error {
	if port+10000 > 65535 {
		return errors.New("loadbench: no room for a cluster bus port")
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
	if err != nil {
		return err
	}
	return l.Close()
}
