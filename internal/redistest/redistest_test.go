package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartKillRestart(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	if s.Port() == 6379 {
		t.Fatal("started on Redis's default port")
	}
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after a restart = %d, %v; want 0: no persistence", n, err)
	}
}

func TestStartCluster(t *testing.T) {
	ctx := context.Background()
	cl := StartCluster(t, 3)
	c := cl.Client()
	// Keys in slots of every master.
	for _, k := range []string{"{a}x", "{b}x", "{c}x", "{d}x", "{e}x", "{f}x"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	var masters atomic.Int32
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if masters.Load() != 3 {
		t.Fatalf("%d masters, want 3", masters.Load())
	}
}

// A cluster with replicas fails over: the killed master's replica takes its
// slots, once released by HoldFailover, with every write the master
// acknowledged before SyncReplicas; the other masters keep theirs, and the
// killed master, restarted, rejoins as a replica of the node that replaced
// it.
func TestClusterFailover(t *testing.T) {
	ctx := context.Background()
	c := StartClusterWith(t, ClusterOptions{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: time.Second})
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	for i := range 3 {
		if r := c.ReplicasOf(c.Nodes[i]); len(r) != 1 || r[0] != c.Nodes[3+i] {
			t.Fatalf("replicas of master %d (%s) = %v, want node %d (%s)", i, c.Nodes[i].Addr(), addrs(r), 3+i, c.Nodes[3+i].Addr())
		}
	}
	// One key on each master.
	keys := map[*Server]string{}
	for n := 0; len(keys) < 3 && n < 1000; n++ {
		k := fmt.Sprintf("{k%d}x", n)
		if m := c.MasterOf(k); keys[m] == "" {
			keys[m] = k
		}
	}
	if len(keys) != 3 {
		t.Fatalf("keys found on %d masters, want 3", len(keys))
	}
	old := c.Nodes[1]
	key := keys[old]
	if s := c.Slot(key); s < 16384/3 || s >= 2*16384/3 {
		t.Fatalf("slot of %s = %d, not in master 1's range", key, s)
	}
	cl := c.Client()
	for k := range 100 {
		for _, key := range keys {
			if err := cl.Incr(ctx, key).Err(); err != nil {
				t.Fatalf("INCR %s (round %d): %v", key, k, err)
			}
		}
	}
	c.SyncReplicas(old, FailoverTimeout)
	// Writes on old now wait: this one is never applied.
	paused := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	defer paused.Close()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := paused.Incr(short, key).Err()
	cancel()
	if err == nil {
		t.Fatal("INCR answered on a master whose writes are paused")
	}
	release := c.HoldFailover(old)
	killed := time.Now()
	old.Kill()
	if old.Running() {
		t.Fatal("Running after Kill")
	}
	// Held, the failure is seen (cluster_state:fail: full coverage is
	// required) and no replica takes over, even given two node timeouts
	// more, which suffice on an idle machine.
	ctx2, cancel2 := context.WithTimeout(ctx, FailoverTimeout)
	defer cancel2()
	watch := c.Nodes[4].admin()
	defer watch.Close()
	if err := poll(ctx2, func() (bool, string) {
		info, err := watch.ClusterInfo(ctx2).Result()
		return err == nil && strings.Contains(info, "cluster_state:fail"), fmt.Sprint(info, err)
	}); err != nil {
		t.Fatalf("the kill is not seen: %v", err)
	}
	time.Sleep(2 * time.Second)
	if m := c.MasterOf(key); m != old {
		t.Fatalf("slot of %s served by %s while the failover was held, want the killed %s", key, m.Addr(), old.Addr())
	}
	release()
	repl := c.WaitFailover(key, old)
	t.Logf("failover seen %v after the kill (held for 2 s after the failure was seen; cluster-node-timeout 1s)", time.Since(killed).Round(time.Millisecond))
	if repl != c.Nodes[4] {
		t.Fatalf("slot of %s failed over to %s, want old's replica %s", key, repl.Addr(), c.Nodes[4].Addr())
	}
	if m := c.MasterOf(key); m != repl {
		t.Fatalf("MasterOf(%s) = %s after the failover, want %s", key, m.Addr(), repl.Addr())
	}
	// A new client finds every value: none lost with the killed master.
	fresh := c.Client()
	for m, key := range keys {
		if v, err := fresh.Get(ctx, key).Result(); err != nil || v != "100" {
			t.Errorf("GET %s (master was %s) = %q, %v; want 100", key, m.Addr(), v, err)
		}
	}
	restarted := time.Now()
	old.Restart()
	c.WaitReplicaOf(old, repl)
	t.Logf("old master a replica %v after its restart", time.Since(restarted).Round(time.Millisecond))
	if r := c.ReplicasOf(repl); len(r) != 1 || r[0] != old {
		t.Fatalf("replicas of the new master = %v, want the restarted %s", addrs(r), old.Addr())
	}
	if m := c.MasterOf(key); m != repl {
		t.Fatalf("MasterOf(%s) = %s after the old master rejoined, want %s", key, m.Addr(), repl.Addr())
	}
}

func addrs(s []*Server) []string {
	var a []string
	for _, n := range s {
		a = append(a, n.Addr())
	}
	return a
}

// TestShared checks that the shared server and cluster are started once and
// handed to each test as a fresh one would be: the keys, cached scripts,
// function libraries and command counts a test left are gone.
func TestShared(t *testing.T) {
	ctx := context.Background()
	var first *Server
	for round := range 2 {
		s := Shared(t)
		if first == nil {
			first = s
		} else if s.Port() != first.Port() {
			t.Fatalf("round %d: shared server on port %d, first on %d: started twice", round, s.Port(), first.Port())
		}
		if !s.Running() {
			t.Fatalf("round %d: shared server not running", round)
		}
		c := s.Client()
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("round %d: DBSIZE = %d, %v; want 0", round, n, err)
		}
		if libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) != 0 {
			t.Fatalf("round %d: FUNCTION LIST = %v, %v; want none", round, libs, err)
		}
		sha := "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" // SHA1 of "return 1"
		if ex, err := c.ScriptExists(ctx, sha).Result(); err != nil || ex[0] {
			t.Fatalf("round %d: SCRIPT EXISTS = %v, %v; want false", round, ex, err)
		}
		if info := c.Info(ctx, "commandstats").Val(); strings.Contains(info, "cmdstat_set:") {
			t.Fatalf("round %d: commandstats count SETs of an earlier test:\n%s", round, info)
		}
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ScriptLoad(ctx, "return 1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.FunctionLoad(ctx, "#!lua name=lib\nredis.register_function('f', function() return 1 end)").Err(); err != nil {
			t.Fatal(err)
		}
	}

	for round := range 2 {
		cl := SharedCluster(t, 3)
		c := cl.Client()
		for _, k := range []string{"{a}x", "{b}x", "{c}x"} {
			if n, err := c.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Fatalf("round %d: EXISTS %s = %d, %v; want 0", round, k, n, err)
			}
			if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatalf("round %d: SET %s: %v", round, k, err)
			}
		}
		if m := cl.MasterOf("{a}x"); !m.Running() {
			t.Fatalf("round %d: master of {a}x not running", round)
		}
	}
}
