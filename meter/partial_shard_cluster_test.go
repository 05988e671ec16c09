package meter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
)

// TestPartialClusterShardMasterKilled runs the meter over the production
// stack of stores (clusterStack) on a Redis Cluster it starts (3 masters,
// 1 replica each, partial coverage). A tenant's quota (open) lives on a
// master that stays up; a global quota split into 4 shards (closed) has
// shard 0 on the victim and at least one shard elsewhere. The victim is
// killed with its failover held back:
//   - every request is still admitted by Redis: a try on a dead shard gives
//     back what its live part took and moves on to a live shard; the
//     fail-closed sharded rule never refuses, the fallback judges nothing;
//   - each shard on a live master, and the tenant's quota, hold in Redis
//     exactly their share less what was settled on them, to the unit;
//   - once a replica serves the victim's slots, every shard does, the
//     victim's shards holding what was settled on them before the kill.
//
// No wall-clock bound: the waits are generous, the checks exact counts.
func TestPartialClusterShardMasterKilled(t *testing.T) {
	cluster := startPartialCluster(t)
	const shards = 4
	shardKey := func(i int) string { return fmt.Sprintf("llmguard:{global:%d}:g-shard", i) }
	victim := cluster.MasterOf(shardKey(0))
	var live []int // the shards off the victim
	for i := range shards {
		if cluster.MasterOf(shardKey(i)) != victim {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		t.Skip("every shard on one master")
	}
	ta := tenantOff(t, cluster, victim, "")
	const quota = 100000
	c, err := config.Parse(fmt.Appendf(nil, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: ua, tenant: %[1]s}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
  - {name: a-month, scope: tenant, unit: tokens, quota: %[2]d, period: month, on_failure: open}
  - {name: g-shard, scope: global, unit: tokens, quota: %[2]d, period: month, shards: %[3]d, on_failure: closed}
`, ta, quota, shards))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := pol.Identify("sk-a")
	st := newClusterStack(t, cluster, pol)
	const used = 150
	gs, am := st.rule("g-shard"), st.rule("a-month")
	if got := gs.ShardKeys(pa, "").Key(0); got != shardKey(0) {
		t.Fatalf("shard 0's key is %q, want %q", got, shardKey(0))
	}
	settled := make([]int64, shards) // per shard, what was settled on it
	var admitted int64
	// run admits n requests of a, each admitted by Redis, and settles them.
	run := func(step string, n int) {
		t.Helper()
		for i := range n {
			x := st.admit(pa)
			if x.Verdict() != Admitted || x.FromFallback() {
				t.Fatalf("%s, request %d: %v (from the fallback %v, closed by %v), want admitted by Redis", step, i, x.Verdict(), x.FromFallback(), x.ClosedBy())
			}
			g := x.Rules()[1]
			if g.Rule.Name != "g-shard" || len(g.Taken) != 1 {
				t.Fatalf("%s, request %d: g-shard %+v, want taken from one shard", step, i, g)
			}
			var s int
			if _, err := fmt.Sscanf(g.Taken[0].Key, "llmguard:{global:%d}", &s); err != nil {
				t.Fatal(err)
			}
			settled[s] += used
			admitted++
			st.settle(x)
		}
		st.flush()
	}
	shardLimit := func(i int) bucket.Limit { return bucket.ShardLimit(gs.LimitAt(time.Now()), shards, i) }
	check := func(step string, which []int) {
		t.Helper()
		if got, want := st.level(am.Key(pa), am.LimitAt(time.Now())), quota-admitted*used; got != want {
			t.Fatalf("%s: a-month holds %d in Redis, want quota − settled = %d", step, got, want)
		}
		for _, i := range which {
			if got, want := st.level(shardKey(i), shardLimit(i)), shardLimit(i).Capacity-settled[i]; got != want {
				t.Fatalf("%s: shard %d holds %d in Redis, want its share − settled on it = %d", step, i, got, want)
			}
		}
	}
	all := []int{0, 1, 2, 3}

	// Step 1: every master up.
	run("step 1", 8)
	check("step 1", all)
	cluster.SyncReplicas(victim, 5*time.Second)
	release := cluster.HoldFailover(victim)
	victim.Kill()

	// Step 2: the victim down and not replaced; every request admitted by
	// the live shards.
	before := settled[0]
	run("step 2", 16)
	if settled[0] != before {
		t.Fatalf("step 2: %d settled on shard 0, whose master is down", settled[0]-before)
	}
	check("step 2", live)
	if f := testFailures(st.metrics, "g-shard", OutcomeFailClosed) + testFailures(st.metrics, "a-month", OutcomeFailOpen); f != 0 {
		t.Fatalf("step 2: %v failure decisions, want none: every limit judged by Redis", f)
	}

	// Step 3: a replica takes over; every shard is served again.
	release()
	cluster.WaitFailover(shardKey(0), victim)
	st.cc.ReloadState(context.Background())
	check("step 3", all)

	// Step 4: requests go to every shard again.
	run("step 4", 8)
	check("step 4", all)
}
