package meter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
)

// TestPartialClusterLeaseMasterKilled runs the meter over a Leased store on
// the production stack (clusterStack) on a Redis Cluster it starts (3
// masters, 1 replica each, partial coverage). A tenant's token bucket
// (leased, closed) lives on the victim, a global quota (open) on a master
// that stays up. The victim is killed with its failover held back:
//   - the node goes on admitting from the lease it holds (taken from Redis
//     before the kill), the global quota charged in Redis each time;
//   - once the lease is spent and its refill fails, that rule alone
//     refuses (fail_closed), the global quota's take given back;
//   - after the failover, the held settlements land once, the unused lease
//     goes back, and each level read from Redis equals its capacity less
//     what was settled, to the unit.
//
// No wall-clock bound: the waits are generous, the checks exact counts.
func TestPartialClusterLeaseMasterKilled(t *testing.T) {
	cluster := startPartialCluster(t)
	victim := cluster.MasterOf("llmguard:{global}:x")
	ta := tenantOff(t, cluster, victim, "")
	// The tenant's bucket on a master other than {global}'s: the victim.
	victim = cluster.MasterOf("{" + ta + "}")
	const capacity, quota = 1000000, 100000
	c, err := config.Parse(fmt.Appendf(nil, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: ua, tenant: %[1]s}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
  - {name: a-tpm, scope: tenant, unit: tokens, rate: 1, per: 24h, burst: %[2]d, lease: {size: 2000, ttl: 10s}, on_failure: closed}
  - {name: g-month, scope: global, unit: tokens, quota: %[3]d, period: month, on_failure: open}
`, ta, capacity, quota))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := pol.Identify("sk-a")
	// A call to a dead master fails as a refused connection in
	// milliseconds, as the app's client makes it (one dial, one redirect),
	// not as a timeout after go-redis's dial retries: the call's other
	// slot groups are then served (a timeout would use up their deadline).
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), DialerRetries: 1, MaxRedirects: 1})
	t.Cleanup(func() { cc.Close() })
	st := newClusterStackOn(t, cc, pol)
	leased := bucket.NewLeased(st.async, bucket.LeaseOptions{SweepEvery: -1})
	t.Cleanup(func() { leased.Close() })
	if st.m, err = New(Options{Store: leased, Fallback: st.fb, Charges: st.charges, Metrics: st.metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	at, gm := st.rule("a-tpm"), st.rule("g-month")
	if st.m.opt.Store != leased || cluster.MasterOf(gm.Key(pa)) == victim {
		t.Fatal("the global quota is on the victim")
	}
	const used, reserved = 150, 500
	tpm := func() int64 { return st.level(at.Key(pa), at.LimitAt(time.Now())) }
	month := func() int64 { return st.level(gm.Key(pa), gm.LimitAt(time.Now())) }
	admitted := func(step string, i int) *Exchange {
		t.Helper()
		x := st.admit(pa)
		if x.Verdict() != Admitted || x.FromFallback() {
			t.Fatalf("%s, request %d: %v (from the fallback %v, closed by %v), want admitted by Redis and the lease", step, i, x.Verdict(), x.FromFallback(), x.ClosedBy())
		}
		return x
	}

	// Step 1: every master up. The first request takes 500 and a lease of
	// 2000; the next two are served from the lease.
	for i := range 3 {
		st.settle(admitted("step 1", i))
	}
	st.flush()
	lease := leased.Stats()["a-tpm"].Outstanding
	if lease != 2000-2*reserved {
		t.Fatalf("step 1: the lease holds %d, want 2000 − 2 × 500", lease)
	}
	if got, want := tpm(), int64(capacity-3*used-lease); got != want {
		t.Fatalf("step 1: a-tpm holds %d in Redis, want capacity − settled − the lease = %d", got, want)
	}
	if got, want := month(), int64(quota-3*used); got != want {
		t.Fatalf("step 1: g-month holds %d in Redis, want %d", got, want)
	}
	cluster.SyncReplicas(victim, 5*time.Second)
	release := cluster.HoldFailover(victim)
	victim.Kill()

	// Step 2: the victim down and not replaced. Two requests spend the
	// lease (their settlements wait for the failover); the third needs a
	// refill, which fails: a-tpm alone refuses it.
	held := []*Exchange{admitted("step 2", 0), admitted("step 2", 1)}
	x := st.admit(pa)
	if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "a-tpm" {
		t.Fatalf("step 2, request 2 (lease spent): %v closed by %v, want fail-closed by a-tpm", x.Verdict(), x.ClosedBy())
	}
	st.flush()
	if got, want := month(), int64(quota-3*used-2*reserved); got != want {
		t.Fatalf("step 2: g-month holds %d in Redis, want %d: two reservations held, the refused one given back", got, want)
	}
	if f := testFailures(st.metrics, "a-tpm", OutcomeFailClosed); f != 1 {
		t.Fatalf("step 2: a-tpm fail_closed decisions %v, want 1", f)
	}
	if f := testFailures(st.metrics, "g-month", OutcomeFailOpen); f != 0 {
		t.Fatalf("step 2: g-month fail_open decisions %v, want 0", f)
	}

	// Step 3: a replica takes over; the held settlements land.
	release()
	cluster.WaitFailover(at.Key(pa), victim)
	st.cc.ReloadState(context.Background())
	for i := 0; ; i++ {
		st.guard.Forget()
		if _, err := st.guard.Take(context.Background(), "", []bucket.Item{{Key: at.Key(pa), Limit: at.LimitAt(time.Now())}}); err == nil {
			break
		}
		if i == 300 {
			t.Fatal("step 3: the promoted replica never served a-tpm")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, y := range held {
		st.settle(y)
	}
	st.flush()
	if got, want := tpm(), int64(capacity-5*used); got != want {
		t.Fatalf("step 3: a-tpm holds %d in Redis, want capacity − settled = %d (the lease spent, each settlement once)", got, want)
	}
	if got, want := month(), int64(quota-5*used); got != want {
		t.Fatalf("step 3: g-month holds %d in Redis, want %d", got, want)
	}

	// Step 4: Redis and a new lease judge again; its unused units go back.
	for i := range 2 {
		st.settle(admitted("step 4", i))
	}
	if err := leased.ReturnAll(); err != nil {
		t.Fatal(err)
	}
	st.flush()
	if got, want := tpm(), int64(capacity-7*used); got != want {
		t.Fatalf("step 4: a-tpm holds %d in Redis, want %d once the lease went back", got, want)
	}
	if got, want := month(), int64(quota-7*used); got != want {
		t.Fatalf("step 4: g-month holds %d in Redis, want %d", got, want)
	}
}
