package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FailoverTimeout bounds WaitFailover, WaitReplicaOf and SyncReplicas: how
// long a cluster may take to replace a killed master, or a restarted node
// to rejoin. It is generous on purpose (a failover takes about two
// cluster-node-timeouts on an idle machine): a bound to stop a test that
// would hang, not a timing assertion.
const FailoverTimeout = 60 * time.Second

// ClusterOptions configures StartClusterWith. The zero value is a cluster
// of three masters without replicas, cluster-node-timeout 2 s, which
// requires full slot coverage: what StartCluster(t, 3) starts.
type ClusterOptions struct {
	// Masters is how many masters share the 16384 slots, in equal ranges
	// (master i serves [i×16384/Masters, (i+1)×16384/Masters)); 0 means 3.
	Masters int
	// ReplicasPerMaster is how many replicas each master gets (CLUSTER
	// REPLICATE); 0 means none, and then no failover is possible.
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout: how long a node may not answer
	// before the others flag it PFAIL and, once a majority of masters
	// agree, FAIL, after which one of its replicas is elected to serve its
	// slots (about 500–1000 ms later). 0 means 2 s. Kept at whole
	// milliseconds of at least 100.
	NodeTimeout time.Duration
	// PartialCoverage sets cluster-require-full-coverage no: while a
	// master is down and not yet replaced, the other masters keep serving
	// their own slots. false (Redis's default) has every node answer
	// CLUSTERDOWN, for every key, until every slot is served again.
	PartialCoverage bool
}

// Cluster is a Redis Cluster owned by a test: masters, and replicas when
// asked for. Its methods ask the running nodes for the cluster's state;
// they must be called from the test's goroutine (they fail the test).
type Cluster struct {
	// Nodes are every node. As started, Nodes[:masters] are the masters
	// (Nodes[i] serves the i-th slot range) and the replicas of master i
	// follow them: Nodes[masters + i×replicasPerMaster + j]. A failover
	// changes the roles, not the order: ask MasterOf.
	Nodes []*Server

	t       testing.TB
	masters int
}

// StartCluster starts masters redis-server nodes with cluster mode on and no
// replicas: StartClusterWith(t, ClusterOptions{Masters: masters}).
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: a cluster needs at least one master, not %d", masters)
	}
	return StartClusterWith(t, ClusterOptions{Masters: masters})
}

// StartClusterWith starts a Redis Cluster configured by o: every node as
// Start would (no persistence), with cluster mode on, and for failover
// cluster-replica-validity-factor 0 (a replica may take over however long
// its link to the master was down: the test killed it) and
// repl-diskless-sync-delay 0 (replicas sync at once). It assigns the
// masters equal ranges of the 16384 slots, gives each node its own config
// epoch, joins them (CLUSTER ADDSLOTS, SET-CONFIG-EPOCH, MEET: what
// `redis-cli --cluster create` does), attaches the replicas (CLUSTER
// REPLICATE), and waits until every node reports cluster_state:ok and
// knows every other, and every replica's link to its master is up. It
// skips and fails t as Start does, and fails t when the cluster does not
// form within startTimeout (15 s).
func StartClusterWith(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Masters < 1 || o.ReplicasPerMaster < 0 {
		t.Fatalf("redistest: a cluster of %d masters with %d replicas each", o.Masters, o.ReplicasPerMaster)
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = defaultNodeTimeout
	}
	bin := lookBinary(t)
	c := &Cluster{t: t, masters: o.Masters}
	for range o.Masters * (1 + o.ReplicasPerMaster) {
		c.Nodes = append(c.Nodes, start(t, bin, clusterArgs(o)))
	}
	if err := c.join(o); err != nil {
		t.Fatal(err)
	}
	return c
}

// defaultNodeTimeout is ClusterOptions.NodeTimeout's default.
const defaultNodeTimeout = 2 * time.Second

// clusterArgs are the redis-server arguments of a node of a cluster
// configured by o (NodeTimeout set).
func clusterArgs(o ClusterOptions) []string {
	coverage := "yes"
	if o.PartialCoverage {
		coverage = "no"
	}
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(max(100, o.NodeTimeout.Milliseconds()), 10),
		"--cluster-require-full-coverage", coverage,
		"--cluster-replica-validity-factor", "0",
		"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", "0",
	}
}

// join makes a cluster of c's started nodes as o lays it out (Masters set):
// slots, config epochs, MEET, replicas; and waits until it has formed,
// within startTimeout.
func (c *Cluster) join(o ClusterOptions) error {
	total := len(c.Nodes)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	clients := make([]*redis.Client, total)
	for i, n := range c.Nodes {
		clients[i] = n.admin()
		defer clients[i].Close()
	}
	for i, cl := range clients {
		if i < o.Masters {
			from, to := i*16384/o.Masters, (i+1)*16384/o.Masters
			slots := make([]int, 0, to-from)
			for s := from; s < to; s++ {
				slots = append(slots, s)
			}
			if err := cl.ClusterAddSlots(ctx, slots...).Err(); err != nil {
				return fmt.Errorf("redistest: cluster addslots on %s: %v", c.Nodes[i].Addr(), err)
			}
		}
		if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return fmt.Errorf("redistest: cluster set-config-epoch on %s: %v", c.Nodes[i].Addr(), err)
		}
	}
	for _, n := range c.Nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.port)).Err(); err != nil {
			return fmt.Errorf("redistest: cluster meet %s: %v", n.Addr(), err)
		}
	}
	if o.ReplicasPerMaster > 0 {
		ids := make([]string, o.Masters)
		for i := range ids {
			id, err := clients[i].ClusterMyID(ctx).Result()
			if err != nil {
				return fmt.Errorf("redistest: cluster myid on %s: %v", c.Nodes[i].Addr(), err)
			}
			ids[i] = id
		}
		for k := o.Masters; k < total; k++ {
			master := (k - o.Masters) / o.ReplicasPerMaster
			// A replica can follow a master only once gossip has told it
			// of the master: retry "ERR Unknown node" until then.
			if err := poll(ctx, func() (bool, string) {
				err := clients[k].ClusterReplicate(ctx, ids[master]).Err()
				return err == nil, fmt.Sprint(err)
			}); err != nil {
				return fmt.Errorf("redistest: cluster replicate %s of %s: %v", c.Nodes[k].Addr(), c.Nodes[master].Addr(), err)
			}
		}
	}
	for i := range c.Nodes {
		if err := poll(ctx, func() (bool, string) {
			if ok, why := c.nodeOK(ctx, clients[i], total); !ok {
				return false, why
			}
			if i < o.Masters {
				return true, ""
			}
			return c.linkUp(ctx, clients[i], c.Nodes[(i-o.Masters)/o.ReplicasPerMaster])
		}); err != nil {
			return fmt.Errorf("redistest: cluster node %s: %v", c.Nodes[i].Addr(), err)
		}
	}
	return nil
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
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// Slot returns the hash slot of key, as the cluster computes it (CLUSTER
// KEYSLOT on a running node). It fails the test when no node answers.
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var last error
	for _, n := range c.running() {
		cl := n.admin()
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		cl.Close()
		if err == nil {
			return int(slot)
		}
		last = err
	}
	c.t.Fatalf("redistest: cluster keyslot %q: no node answered: %v", key, last)
	return 0
}

// KeysOnMasters returns n keys of the form fmt.Sprintf(format, i), for
// i = 0, 1, …, each held by a different master, and those masters, in the
// order found. It fails the test when the cluster has fewer than n masters
// answering or none of the first 10,000 keys reaches the n-th.
func (c *Cluster) KeysOnMasters(format string, n int) ([]string, []*Server) {
	c.t.Helper()
	keys, masters := make([]string, 0, n), make([]*Server, 0, n)
	for i := 0; len(keys) < n; i++ {
		if i == 10000 {
			c.t.Fatalf("redistest: %d keys %q on %d masters: only %d found", n, format, n, len(keys))
		}
		k := fmt.Sprintf(format, i)
		if m := c.MasterOf(k); !slices.Contains(masters, m) {
			keys, masters = append(keys, k), append(masters, m)
		}
	}
	return keys, masters
}

// MasterOf returns the node that serves key's slot as master, in the view
// of the first running node that answers (CLUSTER SLOTS). Right after a
// kill that view may still name the killed master: WaitFailover waits for
// every node to agree on a new one. It fails the test when no node
// answers or the slot is not served.
func (c *Cluster) MasterOf(key string) *Server {
	c.t.Helper()
	slot := c.Slot(key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var last error
	for _, n := range c.running() {
		cl := n.admin()
		port, err := slotMaster(ctx, cl, slot)
		cl.Close()
		if err != nil {
			last = err
			continue
		}
		if s := c.byPort(port); s != nil {
			return s
		}
		last = fmt.Errorf("%s names port %d, not a node of this cluster", n.Addr(), port)
	}
	c.t.Fatalf("redistest: master of %q (slot %d): %v", key, slot, last)
	return nil
}

// ReplicasOf returns the nodes that master reports as its replicas (INFO
// replication), in its order. It fails the test when master does not
// answer.
func (c *Cluster) ReplicasOf(master *Server) []*Server {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := master.admin()
	defer cl.Close()
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		c.t.Fatalf("redistest: info replication on %s: %v", master.Addr(), err)
	}
	var replicas []*Server
	for _, line := range strings.Split(info, "\r\n") {
		// slave0:ip=127.0.0.1,port=40123,state=online,offset=123,lag=0
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ":ip=") {
			continue
		}
		if port, err := strconv.Atoi(field(line[strings.IndexByte(line, ':')+1:], "port")); err == nil {
			if s := c.byPort(port); s != nil {
				replicas = append(replicas, s)
			}
		}
	}
	return replicas
}

// SyncReplicas pauses writes on master for pause (CLIENT PAUSE WRITE:
// clients sending a write, a script included, wait; they do not fail) and
// waits until each of its replicas has processed master's whole
// replication stream, so that killing master within pause loses no write
// it acknowledged. Redis replicates asynchronously: a master killed at an
// arbitrary instant may lose its last acknowledged writes, which a test
// that counts every write must rule out. It fails the test when master has
// no replica, or they do not catch up within pause (at most
// FailoverTimeout).
func (c *Cluster) SyncReplicas(master *Server, pause time.Duration) {
	c.t.Helper()
	replicas := c.ReplicasOf(master)
	if len(replicas) == 0 {
		c.t.Fatalf("redistest: %s has no replica to sync", master.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(pause, FailoverTimeout))
	defer cancel()
	cl := master.admin()
	defer cl.Close()
	if err := cl.Do(ctx, "client", "pause", max(1, pause.Milliseconds()), "write").Err(); err != nil {
		c.t.Fatalf("redistest: client pause on %s: %v", master.Addr(), err)
	}
	for _, r := range replicas {
		rc := r.admin()
		err := poll(ctx, func() (bool, string) {
			want, err := infoInt(ctx, cl, "master_repl_offset")
			if err != nil {
				return false, err.Error()
			}
			got, err := infoInt(ctx, rc, "slave_repl_offset")
			if err != nil {
				return false, err.Error()
			}
			return got >= want, fmt.Sprintf("replica at offset %d, master at %d", got, want)
		})
		rc.Close()
		if err != nil {
			c.t.Fatalf("redistest: replica %s of %s: %v", r.Addr(), master.Addr(), err)
		}
	}
}

// HoldFailover stops master's replicas from taking over its slots
// (cluster-replica-no-failover yes) and returns the func that lets them
// again; the test calls it once. Held, a killed master's slots stay
// unserved for as long as the test needs to observe the outage; released,
// a replica of a master already flagged FAIL starts its election (after
// the usual 500–1000 ms delay), and one of a master not yet flagged waits
// for the flag as it would have. Both fail the test when a replica does
// not answer.
func (c *Cluster) HoldFailover(master *Server) (release func()) {
	c.t.Helper()
	replicas := c.ReplicasOf(master)
	set := func(v string) {
		c.t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, r := range replicas {
			cl := r.admin()
			err := cl.ConfigSet(ctx, "cluster-replica-no-failover", v).Err()
			cl.Close()
			if err != nil {
				c.t.Fatalf("redistest: config set cluster-replica-no-failover %s on %s: %v", v, r.Addr(), err)
			}
		}
	}
	set("yes")
	return func() {
		c.t.Helper()
		set("no")
	}
}

// WaitFailover waits until the slot of key is served by a new master: every
// running node reports cluster_state:ok and names, for that slot, the same
// running master, other than old, which itself reports role:master. It
// returns that master. It fails the test after FailoverTimeout.
func (c *Cluster) WaitFailover(key string, old *Server) *Server {
	c.t.Helper()
	slot := c.Slot(key)
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	var found *Server
	err := poll(ctx, func() (bool, string) {
		found = nil
		nodes := c.running()
		for _, n := range nodes {
			cl := n.admin()
			ok, why := c.nodeOK(ctx, cl, 0)
			port, err := slotMaster(ctx, cl, slot)
			cl.Close()
			switch {
			case !ok:
				return false, fmt.Sprintf("%s: %s", n.Addr(), why)
			case err != nil:
				return false, fmt.Sprintf("%s: %v", n.Addr(), err)
			case port == old.port:
				return false, fmt.Sprintf("%s: slot %d still served by %s", n.Addr(), slot, old.Addr())
			case found == nil:
				found = c.byPort(port)
				if found == nil || !slices.Contains(nodes, found) {
					return false, fmt.Sprintf("%s: slot %d served by port %d, not a running node", n.Addr(), slot, port)
				}
			case found.port != port:
				return false, fmt.Sprintf("%s: slot %d served by port %d, %s says %s", n.Addr(), slot, port, nodes[0].Addr(), found.Addr())
			}
		}
		if found == nil {
			return false, "no node runs"
		}
		cl := found.admin()
		defer cl.Close()
		role, err := infoField(ctx, cl, "role")
		return role == "master", fmt.Sprintf("%s: role %q (%v)", found.Addr(), role, err)
	})
	if err != nil {
		c.t.Fatalf("redistest: failover of slot %d from %s: %v", slot, old.Addr(), err)
	}
	return found
}

// WaitReplicaOf waits until s reports itself a replica of master with its
// replication link up, and every running node reports cluster_state:ok: a
// killed master, once restarted, rejoins this way as a replica of the node
// that replaced it. It fails the test after FailoverTimeout.
func (c *Cluster) WaitReplicaOf(s, master *Server) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	err := poll(ctx, func() (bool, string) {
		for _, n := range c.running() {
			cl := n.admin()
			ok, why := c.nodeOK(ctx, cl, 0)
			cl.Close()
			if !ok {
				return false, fmt.Sprintf("%s: %s", n.Addr(), why)
			}
		}
		cl := s.admin()
		defer cl.Close()
		return c.linkUp(ctx, cl, master)
	})
	if err != nil {
		c.t.Fatalf("redistest: %s as a replica of %s: %v", s.Addr(), master.Addr(), err)
	}
}

// nodeOK reports whether the node of cl says cluster_state:ok, and, when
// known > 0, knows that many nodes.
func (c *Cluster) nodeOK(ctx context.Context, cl *redis.Client, known int) (bool, string) {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return false, err.Error()
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return false, "cluster_state is not ok"
	}
	if known > 0 && !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r\n", known)) {
		return false, fmt.Sprintf("does not know all %d nodes yet", known)
	}
	return true, ""
}

// linkUp reports whether the node of cl is a replica of master with its
// replication link up.
func (c *Cluster) linkUp(ctx context.Context, cl *redis.Client, master *Server) (bool, string) {
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return false, err.Error()
	}
	role, port, link := lineValue(info, "role"), lineValue(info, "master_port"), lineValue(info, "master_link_status")
	if role == "slave" && port == strconv.Itoa(master.port) && link == "up" {
		return true, ""
	}
	return false, fmt.Sprintf("role %s, master port %s, link %s", role, port, link)
}

// running returns the nodes whose process runs.
func (c *Cluster) running() []*Server {
	var up []*Server
	for _, n := range c.Nodes {
		if n.Running() {
			up = append(up, n)
		}
	}
	return up
}

func (c *Cluster) byPort(port int) *Server {
	for _, n := range c.Nodes {
		if n.port == port {
			return n
		}
	}
	return nil
}

// slotMaster returns the port of the master serving slot in the view of
// the node of cl (CLUSTER SLOTS).
func slotMaster(ctx context.Context, cl *redis.Client, slot int) (int, error) {
	ranges, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return 0, err
	}
	for _, r := range ranges {
		if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
			addr := r.Nodes[0].Addr
			port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
			if err != nil {
				return 0, fmt.Errorf("cluster slots: master address %q", addr)
			}
			return port, nil
		}
	}
	return 0, fmt.Errorf("slot %d is not served", slot)
}

// infoField returns name's value in INFO replication.
func infoField(ctx context.Context, cl *redis.Client, name string) (string, error) {
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	return lineValue(info, name), nil
}

func infoInt(ctx context.Context, cl *redis.Client, name string) (int64, error) {
	v, err := infoField(ctx, cl, name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// lineValue returns the value of "name:value" in an INFO reply, or "".
func lineValue(info, name string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return ""
}

// field returns k's value in "k1=v1,k2=v2", or "".
func field(s, k string) string {
	for _, kv := range strings.Split(s, ",") {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// poll calls check every 20 ms until it reports true, or ctx ends; the
// error then carries check's last explanation.
func poll(ctx context.Context, check func() (bool, string)) error {
	for {
		ok, why := check()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), why)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
