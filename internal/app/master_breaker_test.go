package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestChaosClusterMasterPausedOnlyItsKeysFail runs llmguard on a Redis
// Cluster of three masters without replicas (partial coverage: the live
// masters serve their slots while one is down) under a steady load of four
// tenants — a fail-open and a fail-closed one whose buckets live on the
// victim master, the same on another master — freezes the victim
// (SIGSTOP) and later continues it, and checks that the blast radius of
// one master's failure is its own slots (trial17, adv42: one breaker for
// the whole store opened, or closed, for every key):
//   - the victim's breaker opens (llmguard_breaker_state{master=victim} 2)
//     while the others stay closed;
//   - every request of the other master's tenants is admitted by Redis,
//     through the whole run: none by the fallback, none refused;
//   - the victim's fail-open tenant is admitted by its fallback and its
//     fail-closed tenant answered 503, while it is frozen;
//   - reconciliations of requests Redis admitted on the victim before it
//     froze, settled while it is frozen, are held, and land once it is back;
//   - once it is back its breaker closes, Redis admits its tenants again,
//     the fallback's spend is charged back, and each quota's use in Redis
//     is exactly what Redis and the fallback admitted (no delta lost,
//     applied twice or dropped), and in the fallback what it admitted.
//
// No wall-clock bound: every wait is bounded generously and the
// assertions are on counts and states.
func TestChaosClusterMasterPausedOnlyItsKeysFail(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	cluster := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, PartialCoverage: true})
	victim := cluster.Nodes[0]
	tenantOn := func(onVictim bool, not ...string) string { return clusterTenant(t, cluster, victim, onVictim, not...) }
	tOpen := tenantOn(true)
	tClosed := tenantOn(true, tOpen)
	tOther := tenantOn(false)
	tOtherClosed := tenantOn(false, tOther)
	ruleOf := map[string]string{tOpen: "open-quota", tClosed: "closed-quota", tOther: "other-quota", tOtherClosed: "other-closed-quota"}
	keyOf := map[string]string{}
	for tenant, rule := range ruleOf {
		keyOf[tenant] = "llmguard:{" + tenant + "}:" + rule + ":" + tenant
	}
	tenants := []string{tOpen, tClosed, tOther, tOtherClosed}

	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	up := startHoldingUpstream(t, mock.URL)
	defer up.releaseAll()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-%[2]s, user: u-%[2]s, tenant: %[2]s}
  - {key: sk-%[3]s, user: u-%[3]s, tenant: %[3]s}
  - {key: sk-%[4]s, user: u-%[4]s, tenant: %[4]s}
  - {key: sk-%[5]s, user: u-%[5]s, tenant: %[5]s}
limits:
  - {name: open-quota, scope: tenant, unit: tokens, quota: %[6]d, period: month, tenants: [%[2]s], on_failure: open}
  - {name: closed-quota, scope: tenant, unit: tokens, quota: %[6]d, period: month, tenants: [%[3]s], on_failure: closed}
  - {name: other-quota, scope: tenant, unit: tokens, quota: %[6]d, period: month, tenants: [%[4]s], on_failure: open}
  - {name: other-closed-quota, scope: tenant, unit: tokens, quota: %[6]d, period: month, tenants: [%[5]s], on_failure: closed}
store:
  backend: redis_cluster
  cluster_addrs: [%[7]s]
  timeout: 500ms                 # as TestChaosClusterFailover: the live masters' takes must not time out on a loaded machine
  nodes: 2
  breaker: {min_calls: 5, open_for: 300ms}
`, up.url, tOpen, tClosed, tOther, tOtherClosed, failoverQuota, strings.Join(cluster.Addrs(), ", "))))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })

	post := failoverPoster(h.url)
	load := &failoverLoad{stop: make(chan struct{})}
	defer load.halt()
	load.start(tenants, 1, 3*time.Millisecond, post)
	// waitFor waits until ok holds, for at most bound, polling.
	waitFor := func(what string, bound time.Duration, ok func() bool, state func() string) {
		t.Helper()
		for deadline := time.Now().Add(bound); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %s", what, bound, state())
			}
		}
	}
	counts := func(from time.Time) string {
		var out []string
		for _, tenant := range tenants {
			out = append(out, fmt.Sprintf("%s: %d by Redis, %d by the fallback, %d 503", tenant,
				load.count(tenant, from, fsample.fromRedis), load.count(tenant, from, fsample.fromFallback),
				load.count(tenant, from, func(s fsample) bool { return s.status == 503 })))
		}
		return strings.Join(out, "; ")
	}
	breakerOf := func(master string) float64 {
		v, _ := gathered(t, h.app.Registry, "llmguard_breaker_state", map[string]string{"master": master})
		return v
	}
	begun := time.Now()
	waitFor("before the pause", 60*time.Second, func() bool {
		for _, tenant := range tenants {
			if load.count(tenant, begun, fsample.fromRedis) < 20 {
				return false
			}
		}
		return true
	}, func() string { return counts(begun) })

	// Requests Redis admitted on the victim, answered by the upstream only
	// once the victim is frozen: their reconciliations must be held.
	const held = 4
	heldSamples, heldDone := sendHeld(t, up, post, held, tOpen, tClosed)

	paused := time.Now()
	resume := victim.Pause()
	up.releaseAll()
	for len(heldSamples) < held {
		heldSamples = append(heldSamples, <-heldDone)
	}
	heldByRedis := 0
	for _, s := range heldSamples {
		if s.fromRedis() {
			heldByRedis++
		}
	}
	load.mu.Lock()
	load.samples = append(load.samples, heldSamples...)
	load.mu.Unlock()
	if heldByRedis == 0 {
		t.Fatalf("none of the %d held requests was admitted by Redis before the pause: %+v", held, heldSamples)
	}
	// The outage is seen where it matters, in the victim's tenants'
	// answers; then its breaker is open (or half-open between probes) and
	// no other master's.
	waitFor("the victim's fail-open tenant served by the fallback", 60*time.Second,
		func() bool { return load.count(tOpen, paused, fsample.fromFallback) >= 5 }, func() string { return counts(paused) })
	opened := time.Now()
	// With one breaker for the whole store the victim's failed takes
	// (each waiting store.timeout) were a small share of all takes, the
	// other masters' many quick successes kept the failure ratio low, and
	// the breaker never opened: every request of the victim's tenants
	// waited out the timeout (trial17's "closes while a master is still
	// down"); had it opened, the other masters' tenants would have gone to
	// the fallback too (checked below).
	seenOpen, seenGauge := false, false
	for deadline := time.Now().Add(10 * time.Second); !(seenOpen && seenGauge) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		seenOpen = seenOpen || readyz(t, h.admin)["breaker"] == "open"
		seenGauge = seenGauge || breakerOf(victim.Addr()) == 2
	}
	if !seenOpen {
		t.Errorf("/readyz never said breaker open while the victim was frozen: %v", readyz(t, h.admin))
	}
	if !seenGauge {
		t.Errorf("llmguard_breaker_state{master=%q} never read 2 (open) while the victim was frozen: readyz %v", victim.Addr(), readyz(t, h.admin))
	}
	for _, n := range cluster.Nodes[1:] {
		if st := breakerOf(n.Addr()); st != 0 {
			t.Errorf("master %s's breaker is %v while only the victim is down", n.Addr(), st)
		}
	}
	waitFor("the reconciliations held", 30*time.Second, func() bool { return reconcilerOf(h).Stats().Held >= int64(heldByRedis) },
		func() string { return fmt.Sprintf("%+v", reconcilerOf(h).Stats()) })
	waitFor("traffic while the victim's breaker is open", 60*time.Second, func() bool {
		return load.count(tOther, opened, fsample.fromRedis) >= 20 && load.count(tOtherClosed, opened, fsample.fromRedis) >= 20 &&
			load.count(tOpen, opened, fsample.fromFallback) >= 5 &&
			load.count(tClosed, opened, func(s fsample) bool { return s.status == 503 }) >= 5
	}, func() string { return counts(opened) })
	t.Logf("while the victim was frozen (its fail-open tenant served by the fallback %v after the pause): %s", opened.Sub(paused).Round(time.Millisecond), counts(opened))

	resume()
	resumed := time.Now()
	waitFor("the victim's breaker closed", 60*time.Second, func() bool { return readyz(t, h.admin)["breaker"] == "closed" },
		func() string { return fmt.Sprintf("readyz %v", readyz(t, h.admin)) })
	back := time.Now()
	waitFor("Redis admits the victim's tenants again", 60*time.Second, func() bool {
		return load.count(tOpen, back, fsample.fromRedis) >= 20 && load.count(tClosed, back, fsample.fromRedis) >= 20
	}, func() string { return counts(back) })
	t.Logf("the victim's breaker closed %v after it was continued", back.Sub(resumed).Round(time.Millisecond))
	load.halt()

	async := reconcilerOf(h)
	waitFor("the reconciler drained", 30*time.Second, func() bool { return async.Stats().Pending == 0 },
		func() string { return fmt.Sprintf("%+v", async.Stats()) })
	charges := h.app.stores.charges
	waitFor("the fallback's spend charged", 30*time.Second, func() bool { return !charges.Owes() },
		func() string { return fmt.Sprintf("%+v", charges.Stats()) })
	if st := charges.Stats(); st.Dropped != [len(st.Dropped)]uint64{} || st.Applied == 0 {
		t.Errorf("fallback charges: %+v, want some applied and none dropped", st)
	}
	if st := async.Stats(); st.Dropped != 0 {
		t.Errorf("reconciler dropped %d reconciliations: %+v", st.Dropped, st)
	}

	type tally struct{ redis, fallback, closed503 int }
	tallies := map[string]*tally{}
	for _, tenant := range tenants {
		tallies[tenant] = &tally{}
	}
	for _, s := range load.snapshot() {
		ta := tallies[s.tenant]
		onVictim := s.tenant == tOpen || s.tenant == tClosed
		switch {
		case s.err != nil:
			t.Errorf("%s: request failed: %v", s.tenant, s.err)
		case s.fromRedis():
			ta.redis++
		case onVictim && s.fromFallback() && s.tenant == tOpen:
			ta.fallback++
		case onVictim && s.status == 503 && s.tenant == tClosed && s.retryAfter != "":
			ta.closed503++
		default:
			t.Errorf("%s: answered %d (remaining %d, Retry-After %q), which its limit never allows here (the other masters' tenants: only Redis's admissions)",
				s.tenant, s.status, s.remaining, s.retryAfter)
		}
	}
	for _, tenant := range tenants {
		ta := tallies[tenant]
		t.Logf("%s (%s): %d by Redis, %d by the fallback, %d answered 503", tenant, ruleOf[tenant], ta.redis, ta.fallback, ta.closed503)
	}

	// The quota in Redis is the ledger of what was admitted: every
	// settled request's use once, whichever store admitted it.
	ctx := context.Background()
	rc := cluster.Client()
	limitOf := map[string]bucket.Limit{}
	for _, r := range h.app.pol.Load().Rules() {
		limitOf[r.Name] = r.LimitAt(frozen)
	}
	for _, tenant := range tenants {
		ta := tallies[tenant]
		v, err := rc.Get(ctx, keyOf[tenant]).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", keyOf[tenant], err)
		}
		f := strings.Fields(v)
		used, err := strconv.ParseInt(f[1], 10, 64)
		if len(f) != 3 || f[0] != "q" || err != nil {
			t.Fatalf("%s = %q, not a quota", keyOf[tenant], v)
		}
		if want := int64(ta.redis+ta.fallback) * failoverUsed; used != want {
			t.Errorf("%s: %d tokens used in Redis, want %d ((%d by Redis + %d by the fallback) × %d): off by %d",
				tenant, used, want, ta.redis, ta.fallback, failoverUsed, used-want)
		}
		// Held, not a take: a take would first seed the bucket from the
		// node's last reading of Redis (bucket.Fallback.ObserveLevels).
		held, err := h.app.stores.fallback.(*bucket.Fallback).Held(ctx, keyOf[tenant], limitOf[ruleOf[tenant]])
		d := bucket.Decision{Buckets: []bucket.Status{held}}
		if err != nil || len(d.Buckets) != 1 {
			t.Fatalf("reading the fallback's %s: %+v, %v", keyOf[tenant], d, err)
		}
		// The fallback's bucket started at the node's last reading of Redis
		// (bucket.Fallback.ObserveLevels) once it served the tenant: what
		// it holds is that start's shortfall from the share plus its own
		// spend; the spend alone is checked in Redis above, charged back.
		if got, want := failoverQuota/2-d.Buckets[0].Remaining, int64(ta.fallback)*failoverUsed; got != want && (ta.fallback == 0 || got < want || got > want+failoverQuota/2) {
			t.Errorf("%s: %d tokens used in the fallback, want %d", tenant, got, want)
		}
	}
	if tallies[tOpen].fallback == 0 || tallies[tClosed].closed503 == 0 {
		t.Error("the victim's tenants were never served by the fallback or refused: the outage was not seen")
	}
}
