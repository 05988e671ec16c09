package meter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// TestPartialClusterMasterKilled runs the meter over the production stack
// of stores (bucket.Redis on a cluster client, Guarded with one breaker
// per master, AsyncReconciler, the per-node Fallback and ChargeBack) on a
// Redis Cluster it starts (3 masters, 1 replica each, partial coverage).
// Tenants a and b live on masters that stay up; the {global} slot on the
// victim. a's requests take a tenant quota (open) and a global quota
// (open), b's a tenant quota (open) and a global quota (closed). The
// victim is killed with its failover held back:
//   - a's requests are admitted, charged in Redis on the live master for
//     a's tenant quota (its level read from Redis: quota − what was
//     settled, to the unit) and judged by the fallback for the global one;
//   - b's requests are refused (fail_closed), and b's tenant quota in Redis
//     is back to its level before them (a refusal spends nothing);
//   - once a replica serves the slot again, the fallback's spend is
//     charged back to it, and the global quotas in Redis equal what was
//     settled before the kill plus what the fallback admitted: no delta
//     lost, nothing charged twice; later requests are judged by Redis.
//
// No wall-clock bound: the waits are generous, the checks exact counts.
func TestPartialClusterMasterKilled(t *testing.T) {
	cluster := startPartialCluster(t)
	const globalTag = "llmguard:{global}:x"
	victim := cluster.MasterOf(globalTag)
	ta := tenantOff(t, cluster, victim, "")
	tb := tenantOff(t, cluster, victim, ta)
	const quota = 100000
	c, err := config.Parse(fmt.Appendf(nil, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: ua, tenant: %[1]s}
  - {key: sk-b, user: ub, tenant: %[2]s}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
  - {name: a-month, scope: tenant, unit: tokens, quota: %[3]d, period: month, tenants: [%[1]s], on_failure: open}
  - {name: b-month, scope: tenant, unit: tokens, quota: %[3]d, period: month, tenants: [%[2]s], on_failure: open}
  - {name: g-open, scope: global, unit: tokens, quota: %[3]d, period: month, tenants: [%[1]s], on_failure: open}
  - {name: g-closed, scope: global, unit: tokens, quota: %[3]d, period: month, tenants: [%[2]s], on_failure: closed}
`, ta, tb, quota))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := pol.Identify("sk-a")
	pb, _ := pol.Identify("sk-b")
	rule := func(name string) *policy.Rule {
		for i := range pol.Rules() {
			if r := &pol.Rules()[i]; r.Name == name {
				return r
			}
		}
		t.Fatalf("no rule %q", name)
		return nil
	}

	st := newClusterStack(t, cluster, pol)
	ctx, cc, guard, fb, charges, metrics := context.Background(), st.cc, st.guard, st.fb, st.charges, st.metrics
	admit, settle, flush := st.admit, st.settle, st.flush
	const used = 150
	// level reads a rule's bucket of p from Redis.
	level := func(name string, p policy.Principal) int64 {
		t.Helper()
		ru := rule(name)
		return st.level(ru.Key(p), ru.LimitAt(time.Now()))
	}
	fallbackLevel := func(name string, p policy.Principal) int64 {
		t.Helper()
		ru := rule(name)
		d, err := fb.Take(ctx, "", []bucket.Item{{Key: ru.Key(p), Limit: ru.LimitAt(time.Now())}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Buckets[0].Remaining
	}
	// Step 1: every master up; 3 requests each, judged by Redis.
	const before = 3
	var gSeen int64 // g-open's Remaining at a's last take through Redis, then settled
	for i := range before {
		for _, p := range []policy.Principal{pa, pb} {
			x := admit(p)
			if x.Verdict() != Admitted || x.FromFallback() {
				t.Fatalf("step 1, request %d of %s: %v (from the fallback %v), want admitted by Redis", i, p.Tenant, x.Verdict(), x.FromFallback())
			}
			if p == pa { // the reading, moved by the settlement's delta (ObserveDelta)
				gSeen = x.Rules()[1].Status.Remaining - (used - x.Rules()[1].Reserved)
			}
			settle(x)
		}
	}
	flush()
	for _, name := range []string{"a-month", "g-open"} {
		if got := level(name, pa); got != quota-before*used {
			t.Fatalf("step 1: %s holds %d in Redis, want %d", name, got, quota-before*used)
		}
	}
	// The replica holds every write, so the failover loses none of them.
	cluster.SyncReplicas(victim, 5*time.Second)
	release := cluster.HoldFailover(victim)
	victim.Kill()

	// Step 2: the victim is down and not replaced. a: the tenant quota in
	// Redis, the global one in the fallback; b: refused, given back.
	const during = 8
	var aSeen int64 // a-month's Remaining at a's last take, from Redis, then settled
	for i := range during {
		x := admit(pa)
		if x.Verdict() != Admitted || !x.FromFallback() {
			t.Fatalf("step 2, request %d of a: %v (from the fallback %v), want admitted, part by the fallback", i, x.Verdict(), x.FromFallback())
		}
		if rs := x.Rules(); len(rs) != 2 || rs[0].Rule.Name != "a-month" || rs[0].Fallback || rs[1].Rule.Name != "g-open" || !rs[1].Fallback {
			t.Fatalf("step 2, request %d of a: rules %+v, want a-month by Redis, g-open by the fallback", i, rs)
		}
		aSeen = x.Rules()[0].Status.Remaining - (used - x.Rules()[0].Reserved)
		settle(x)
		y := admit(pb)
		if y.Verdict() != FailClosed || y.ClosedBy() == nil || y.ClosedBy().Name != "g-closed" {
			t.Fatalf("step 2, request %d of b: %v closed by %v, want fail-closed by g-closed", i, y.Verdict(), y.ClosedBy())
		}
	}
	flush()
	if got, want := level("a-month", pa), int64(quota-(before+during)*used); got != want {
		t.Fatalf("step 2: a-month holds %d in Redis on its live master, want quota − settled = %d", got, want)
	}
	if got, want := level("b-month", pb), int64(quota-before*used); got != want {
		t.Fatalf("step 2: b-month holds %d in Redis, want %d: the refused requests' takes given back", got, want)
	}
	// The fallback started each quota at what a's last take through Redis
	// saw left, moved by that take's settlement, over the two nodes
	// (bucket.Fallback.ObserveLevels and ObserveDelta).
	if got, want := fallbackLevel("g-open", pa), min(quota/2, gSeen/2)-during*used; got != want {
		t.Fatalf("step 2: the fallback's g-open holds %d, want min(share, %d seen / 2) − settled = %d", got, gSeen, want)
	}
	if got, want := fallbackLevel("a-month", pa), min(quota/2, aSeen/2); got != want {
		t.Fatalf("step 2: the fallback's a-month holds %d, want min(share, %d seen / 2) = %d: Redis judged it", got, aSeen, want)
	}
	if open, closed, none := testFailures(metrics, "g-open", OutcomeFailOpen), testFailures(metrics, "g-closed", OutcomeFailClosed),
		testFailures(metrics, "a-month", OutcomeFailOpen)+testFailures(metrics, "b-month", OutcomeFailOpen); open != during || closed != during || none != 0 {
		t.Fatalf("step 2: failure decisions g-open %v, g-closed %v, tenant quotas %v; want %d, %d, 0", open, closed, none, during, during)
	}

	// Step 3: a replica takes over; the fallback's spend is charged back.
	release()
	cluster.WaitFailover(globalTag, victim)
	cc.ReloadState(ctx)
	for i := 0; charges.Owes(); i++ {
		if i == 300 {
			t.Fatalf("step 3: the fallback's charges never landed: %+v", charges.Stats())
		}
		guard.Forget()
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = charges.Flush(fctx)
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	flush()
	if got, want := level("g-open", pa), int64(quota-(before+during)*used); got != want {
		t.Fatalf("step 3: g-open holds %d in Redis after the failover, want quota − settled before − charged back = %d", got, want)
	}
	if got, want := level("g-closed", pb), int64(quota-before*used); got != want {
		t.Fatalf("step 3: g-closed holds %d in Redis, want %d", got, want)
	}

	// Step 4: Redis judges every rule again.
	const after = 2
	var x *Exchange
	for i := 0; i < 300; i++ {
		if x = admit(pa); x.Verdict() == Admitted && !x.FromFallback() {
			break
		}
		if x.Verdict() == Admitted {
			settle(x) // through the fallback still (the breaker half-open): counted below
			t.Fatalf("step 4: admitted by the fallback after the failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	settle(x)
	for range after - 1 {
		if x = admit(pa); x.Verdict() != Admitted || x.FromFallback() {
			t.Fatalf("step 4: %v (from the fallback %v), want admitted by Redis", x.Verdict(), x.FromFallback())
		}
		settle(x)
	}
	flush()
	for _, name := range []string{"a-month", "g-open"} {
		if got, want := level(name, pa), int64(quota-(before+during+after)*used); got != want {
			t.Fatalf("step 4: %s holds %d in Redis, want %d: nothing lost or charged twice", name, got, want)
		}
	}
}

// testFailures is llmguard_store_failure_decisions_total{limit, decision}.
func testFailures(m *Metrics, limit, decision string) float64 {
	return testutil.ToFloat64(m.failures.WithLabelValues(limit, decision))
}

// startPartialCluster starts the Redis Cluster of the partial-failure
// tests: 3 masters with a replica each, a 1 s node timeout, and partial
// coverage (a master down fails its slots only). Skipped with -short.
func startPartialCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	return redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: time.Second, PartialCoverage: true})
}

// tenantOff is a tenant name "t<n>" other than not whose hash tag lives
// on a master other than master.
func tenantOff(t *testing.T, cluster *redistest.Cluster, master *redistest.Server, not string) string {
	t.Helper()
	for n := range 200 {
		if name := fmt.Sprintf("t%d", n); name != not && cluster.MasterOf("{"+name+"}") != master {
			return name
		}
	}
	t.Fatalf("no tenant name off master %s", master.Addr())
	return ""
}

// clusterStack is the production stack of stores over a Redis Cluster a
// test started (bucket.Redis on its cluster client, Guarded with one
// breaker per master, AsyncReconciler, the per-node Fallback of 2 nodes
// and ChargeBack), with a Meter over it and the steps tests take.
type clusterStack struct {
	t       *testing.T
	pol     *policy.Policy
	cc      *redis.ClusterClient
	r       *bucket.Redis
	guard   *bucket.Guarded
	async   *bucket.AsyncReconciler
	fb      *bucket.Fallback
	charges *bucket.ChargeBack
	metrics *Metrics
	m       *Meter
}

func newClusterStack(t *testing.T, cluster *redistest.Cluster, pol *policy.Policy) *clusterStack {
	t.Helper()
	return newClusterStackOn(t, cluster.Client(), pol)
}

// newClusterStackOn is newClusterStack over the cluster client cc.
func newClusterStackOn(t *testing.T, cc *redis.ClusterClient, pol *policy.Policy) *clusterStack {
	t.Helper()
	ctx := context.Background()
	st := &clusterStack{t: t, pol: pol, cc: cc}
	var err error
	if st.r, err = bucket.NewRedis(bucket.RedisOptions{Client: cc}); err != nil {
		t.Fatal(err)
	}
	if err := st.r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	masterOf := func(key string) string {
		cl, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return ""
		}
		return cl.Options().Addr
	}
	st.guard = bucket.NewGuarded(st.r, bucket.GuardOptions{
		Timeout: 500 * time.Millisecond, MinCalls: 5, OpenFor: 300 * time.Millisecond, MasterOf: masterOf,
		OnCall: func(call bucket.Call) {
			if call.Result == bucket.ResultFailed {
				cc.ReloadState(ctx) // as the app does: follow a promotion
			}
		},
	})
	st.async = bucket.NewAsyncReconciler(st.guard, bucket.AsyncOptions{})
	st.fb = bucket.NewFallback(bucket.FallbackOptions{Nodes: 2})
	if st.charges, err = bucket.NewChargeBack(bucket.ChargeOptions{Store: st.guard}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.async.Close(); st.fb.Close() })
	if st.metrics, err = NewMetrics(prometheus.NewRegistry(), MetricsOptions{}); err != nil {
		t.Fatal(err)
	}
	st.m, err = New(Options{Store: st.async, Fallback: st.fb, Charges: st.charges, Metrics: st.metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// admit asks for a chat of p reserving 500 tokens (100 in, 400 out).
func (st *clusterStack) admit(p policy.Principal) *Exchange {
	return st.m.Admit(Request{ID: bucket.NewRequestID(time.Now()), Principal: p, Policy: st.pol, Flavor: spec.FlavorOpenAI,
		Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true, Estimate: spec.Usage{InputTokens: 100, OutputTokens: 400}})
}

// settle settles x at 150 tokens (100 in, 50 out).
func (st *clusterStack) settle(x *Exchange) {
	st.t.Helper()
	if !x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200}) {
		st.t.Fatal("settle did nothing")
	}
}

// flush waits until every queued reconciliation and void landed.
func (st *clusterStack) flush() {
	st.t.Helper()
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.async.Flush(fctx); err != nil {
		st.t.Fatal(err)
	}
}

// level reads the bucket key of limit l from Redis (a cost-0 take, which
// writes nothing), on whichever master serves it now.
func (st *clusterStack) level(key string, l bucket.Limit) int64 {
	st.t.Helper()
	ctx := context.Background()
	var d bucket.Decision
	var err error
	for range 50 {
		if d, err = st.r.Take(ctx, "", []bucket.Item{{Key: key, Limit: l}}); err == nil {
			return d.Buckets[0].Remaining
		}
		st.cc.ReloadState(ctx)
		time.Sleep(100 * time.Millisecond)
	}
	st.t.Fatalf("reading %s from Redis: %v", key, err)
	return 0
}

// rule is pol's rule name.
func (st *clusterStack) rule(name string) *policy.Rule {
	st.t.Helper()
	for i := range st.pol.Rules() {
		if r := &st.pol.Rules()[i]; r.Name == name {
			return r
		}
	}
	st.t.Fatalf("no rule %q", name)
	return nil
}
