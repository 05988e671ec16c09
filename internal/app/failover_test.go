package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The failover test's workload: every request reserves failoverInput +
// failoverMaxTokens tokens and uses failoverInput + failoverOutput, so its
// reconciliation gives back failoverMaxTokens − failoverOutput (15) tokens.
// A request whose delta was lost would leave 15 tokens too many, one whose
// Void was lost 28, one whose delta was applied twice 15 too few.
const (
	failoverBody      = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`
	failoverInput     = hiInput // the mock reports the same prompt tokens as llmguard's estimate
	failoverMaxTokens = 20
	failoverOutput    = 5
	failoverUsed      = failoverInput + failoverOutput // what one settled request uses
	// failoverQuota is each tenant's monthly token quota: never reached by
	// the load, so every denial would be a bug. With store.nodes 2 a node's
	// fallback share is half of it, so a response's remaining tokens tell
	// where it was admitted: above half, by Redis; at most half, by the
	// fallback.
	failoverQuota = 10_000_000
)

// fsample is one request of the failover load, as its client saw it.
type fsample struct {
	tenant     string
	start, end time.Time
	status     int
	remaining  int64 // x-ratelimit-remaining-tokens, -1 when absent
	retryAfter string
	err        error
}

// fromRedis reports whether the request was admitted by Redis (not by the
// node's fallback, whose share is at most half the quota).
func (s fsample) fromRedis() bool { return s.status == 200 && s.remaining > failoverQuota/2 }

// fromFallback reports whether the request was admitted by the node's
// fallback bucket.
func (s fsample) fromFallback() bool {
	return s.status == 200 && s.remaining >= 0 && s.remaining <= failoverQuota/2
}

// failoverLoad is the test's traffic: a few paced clients per tenant, each
// bounded in count and stopped by stop.
type failoverLoad struct {
	mu      sync.Mutex
	samples []fsample
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func (l *failoverLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// count returns how many samples of tenant that started at or after from
// satisfy ok.
func (l *failoverLoad) count(tenant string, from time.Time, ok func(fsample) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.samples {
		if s.tenant == tenant && !s.start.Before(from) && ok(s) {
			n++
		}
	}
	return n
}

func (l *failoverLoad) snapshot() []fsample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.samples)
}

// failoverPoster returns a function that posts failoverBody to the
// llmguard at url as tenant (key sk-<tenant>), with the header pairs
// given, and describes the answer: status, Retry-After, the tokens left.
// A transport error is recorded in the sample, not reported.
func failoverPoster(url string) func(tenant string, headers ...string) fsample {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(tenant string, headers ...string) fsample {
		s := fsample{tenant: tenant, start: time.Now(), remaining: -1}
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(failoverBody))
		req.Header.Set("Authorization", "Bearer sk-"+tenant)
		req.Header.Set("x-mock-completion-tokens", strconv.Itoa(failoverOutput))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			s.err, s.end = err, time.Now()
			return s
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s.end, s.status, s.retryAfter = time.Now(), resp.StatusCode, resp.Header.Get("Retry-After")
		if v, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64); err == nil {
			s.remaining = v
		}
		return s
	}
}

// start runs perTenant clients for each tenant, each posting one request
// every pace (the cluster's nodes need CPU too) until halt, at most 20,000.
func (l *failoverLoad) start(tenants []string, perTenant int, pace time.Duration, post func(string, ...string) fsample) {
	for _, tenant := range tenants {
		for range perTenant {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for n := 0; n < 20000; n++ {
					select {
					case <-l.stop:
						return
					case <-time.After(pace):
					}
					s := post(tenant)
					l.mu.Lock()
					l.samples = append(l.samples, s)
					l.mu.Unlock()
				}
			}()
		}
	}
}

// sendHeld posts n requests, alternately as tenants a and b, that up holds
// once they reach it, and waits until each has either reached up or been
// answered (a take that failed is answered without reaching it). It
// returns the answers already in and the channel the rest will arrive on
// once up releases them.
func sendHeld(t *testing.T, up *holdingUpstream, post func(string, ...string) fsample, n int, a, b string) ([]fsample, chan fsample) {
	t.Helper()
	done := make(chan fsample, n)
	for i := range n {
		go func() { done <- post([]string{a, b}[i%2], "x-test-hold", "1") }()
	}
	var answered []fsample
	for arrived := 0; arrived+len(answered) < n; {
		select {
		case <-up.arrived:
			arrived++
		case s := <-done:
			answered = append(answered, s)
		case <-time.After(30 * time.Second):
			t.Fatalf("the held requests neither reached the upstream nor were answered within 30 s")
		}
	}
	return answered, done
}

// TestChaosClusterFailover runs llmguard on a Redis Cluster of three
// masters with a replica each, under a steady load of three tenants — two
// whose buckets live on one master (one limit fails open, one closed), one
// on another master — kills the first master (SIGKILL) mid-run, lets the
// cluster fail over to its replica, restarts the killed node (it rejoins as
// a replica), and checks DESIGN.md §7 through the failover:
//   - nothing panics, and no reconciliation is dropped;
//   - during the gap the fail-open limit admits from the node's fallback
//     and the fail-closed limit answers 503 with Retry-After; nothing else
//     is refused;
//   - after the failover both limits are served by Redis again (go-redis
//     follows the new master), and Redis enforces them: a quota set
//     nearly used up in Redis denies;
//   - no delta is lost, none applied twice, none applied to the wrong
//     store: once the reconciler has drained and the fallback's spend has
//     been charged to Redis, each quota's used tokens in Redis are exactly
//     failoverUsed × the requests Redis or the fallback admitted, and in
//     the node's fallback exactly failoverUsed × the requests the fallback
//     admitted. Requests whose take failed during the gap may have been
//     applied by Redis before the failure was seen: their Voids must have
//     landed too for the equality to hold.
//
// Redis replicates asynchronously: a master killed at an arbitrary instant
// may lose the writes of its last instant, takes and reconciliations that
// llmguard saw acknowledged, which is Redis's bound and not llmguard's. So
// the test pauses writes on the master and waits for its replica to catch
// up (redistest's SyncReplicas) right before the SIGKILL: the requests of
// that instant wait for the store timeout and fail over to the fallback or
// 503 like those after the kill, and every difference in the final state
// is llmguard's.
//
// The gap — from the kill to the first request of the killed master's
// tenants admitted by Redis again, and to the last one that was not — is
// logged; docs/measurements.md, "Cluster failover", gives the figures of this
// machine. No wall-clock bound: every wait is bounded generously and the
// assertions are on counts and states.
func TestChaosClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	cluster := redistest.StartClusterWith(t, redistest.ClusterOptions{
		Masters: 3, ReplicasPerMaster: 1, NodeTimeout: time.Second, PartialCoverage: true,
	})
	victim := cluster.Nodes[0]
	// Tenants by where their buckets live: tOpen and tClosed on the victim,
	// tOther on another master.
	tenantOn := func(onVictim bool, not ...string) string { return clusterTenant(t, cluster, victim, onVictim, not...) }
	tOpen := tenantOn(true)
	tClosed := tenantOn(true, tOpen)
	tOther := tenantOn(false)
	keyOf := map[string]string{
		tOpen:   "llmguard:{" + tOpen + "}:open-quota:" + tOpen,
		tClosed: "llmguard:{" + tClosed + "}:closed-quota:" + tClosed,
		tOther:  "llmguard:{" + tOther + "}:other-quota:" + tOther,
	}
	tenants := []string{tOpen, tClosed, tOther}

	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	up := startHoldingUpstream(t, mock.URL)
	defer up.releaseAll() // before the app's cleanup, which waits for the held requests
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-%[2]s, user: u-%[2]s, tenant: %[2]s}
  - {key: sk-%[3]s, user: u-%[3]s, tenant: %[3]s}
  - {key: sk-%[4]s, user: u-%[4]s, tenant: %[4]s}
limits:
  - {name: open-quota, scope: tenant, unit: tokens, quota: %[5]d, period: month, tenants: [%[2]s], on_failure: open}
  - {name: closed-quota, scope: tenant, unit: tokens, quota: %[5]d, period: month, tenants: [%[3]s], on_failure: closed}
  - {name: other-quota, scope: tenant, unit: tokens, quota: %[5]d, period: month, tenants: [%[4]s], on_failure: open}
store:
  backend: redis_cluster
  cluster_addrs: [%[6]s]
  timeout: 500ms                 # a take on a loaded machine (two CPU hogs, load 15) took over 100 ms: the held requests below must be admitted by Redis
  nodes: 2
  breaker: {min_calls: 5, open_for: 300ms}
`, up.url, tOpen, tClosed, tOther, failoverQuota, strings.Join(cluster.Addrs(), ", "))))
	if err != nil {
		t.Fatal(err)
	}
	// The quotas' month is read from a frozen clock, so that it cannot
	// change during the run; Redis keeps its own TIME for the keys' TTLs.
	frozen := time.Now()
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })

	post := failoverPoster(h.url)

	load := &failoverLoad{stop: make(chan struct{})}
	defer load.halt() // on every way out, t.Fatal included
	load.start(tenants, 2, 2*time.Millisecond, post)
	// waitRedis waits until every tenant in ts has n requests admitted by
	// Redis that started at or after from, for at most bound.
	waitRedis := func(what string, bound time.Duration, from time.Time, n int, ts ...string) {
		t.Helper()
		for deadline := time.Now().Add(bound); ; time.Sleep(20 * time.Millisecond) {
			done := true
			for _, tenant := range ts {
				done = done && load.count(tenant, from, fsample.fromRedis) >= n
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				var got []string
				for _, tenant := range ts {
					got = append(got, fmt.Sprintf("%s %d", tenant, load.count(tenant, from, fsample.fromRedis)))
				}
				t.Fatalf("%s: fewer than %d requests admitted by Redis within %v: %s", what, n, bound, strings.Join(got, ", "))
			}
		}
	}

	begun := time.Now()
	waitRedis("before the kill", 60*time.Second, begun, 30, tenants...)
	// Requests admitted now whose answers the upstream holds until the
	// victim is dead: their reconciliations must wait for the failover. A
	// request whose take failed (the store timeout on a loaded machine) is
	// answered without reaching the upstream.
	const held = 6
	heldSamples, heldDone := sendHeld(t, up, post, held, tOpen, tClosed)
	// The victim's replica takes over only once the held reconciliations
	// have been tried against the dead master.
	releaseFailover := cluster.HoldFailover(victim)
	paused := time.Now()
	cluster.SyncReplicas(victim, redistest.FailoverTimeout)
	killed := time.Now()
	victim.Kill()
	up.releaseAll()
	for len(heldSamples) < held {
		heldSamples = append(heldSamples, <-heldDone) // bounded by the client's timeout
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
		t.Fatalf("none of the %d held requests was admitted by Redis before the kill: %+v", held, heldSamples)
	}
	for deadline := time.Now().Add(30 * time.Second); reconcilerOf(h).Stats().Held < int64(heldByRedis); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d held requests' reconciliations are not held 30 s after the kill: %+v", heldByRedis, reconcilerOf(h).Stats())
		}
	}
	heldSeen := time.Now()
	releaseFailover()
	successor := cluster.WaitFailover(keyOf[tOpen], victim)
	failedOver := time.Now()
	if s := cluster.WaitFailover(keyOf[tClosed], victim); s != successor {
		t.Fatalf("the victim's slots went to %s and %s", successor.Addr(), s.Addr())
	}
	// 30 s is far more than a client that follows the failover needs (under a
	// second on this machine), and half of go-redis's own reload interval
	// (60 s), which is what a client that waits for it would take.
	waitRedis("after the failover", 30*time.Second, failedOver, 30, tOpen, tClosed)
	rejoining := time.Now()
	victim.Restart()
	cluster.WaitReplicaOf(victim, successor)
	rejoined := time.Now()
	waitRedis("after the killed master rejoined", 60*time.Second, rejoined, 30, tenants...)
	load.halt()

	// The reconciler drains: everything held through the gap is applied.
	async := reconcilerOf(h)
	for deadline := time.Now().Add(30 * time.Second); async.Stats().Pending != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reconciler not drained 30 s after the load: %+v", async.Stats())
		}
	}
	// The fallback's spend is charged to Redis.
	charges := h.app.stores.charges
	for deadline := time.Now().Add(30 * time.Second); charges.Owes(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fallback spend not charged 30 s after the load: %+v", charges.Stats())
		}
	}
	if st := charges.Stats(); st.Dropped != [len(st.Dropped)]uint64{} {
		t.Errorf("fallback charges dropped: %+v", st)
	}
	samples := load.snapshot()

	// Nothing panicked, nothing was dropped.
	m := h.scrape()
	if n := m["llmguard_panics_total"].sum(nil); n != 0 {
		t.Errorf("%v panics recovered", n)
	}
	if st := async.Stats(); st.Dropped != 0 {
		t.Errorf("reconciler dropped %d reconciliations: %+v", st.Dropped, st)
	}

	// Every answer is one the failure story allows.
	type tally struct{ redis, fallback, closed503 int }
	tallies := map[string]*tally{tOpen: {}, tClosed: {}, tOther: {}}
	var gapFirstOK, gapLastFail time.Time
	var slowestHealthy, slowestGap time.Duration // the victim's tenants, before the pause and after it
	for _, s := range samples {
		ta := tallies[s.tenant]
		switch {
		case s.err != nil:
			t.Errorf("%s: request failed: %v", s.tenant, s.err)
		case s.fromRedis():
			ta.redis++
		case s.fromFallback() && s.tenant != tClosed:
			ta.fallback++
		case s.status == 503 && s.tenant == tClosed && s.retryAfter != "":
			ta.closed503++
		default:
			t.Errorf("%s: answered %d (remaining %d, Retry-After %q), which its limit never allows here",
				s.tenant, s.status, s.remaining, s.retryAfter)
			continue
		}
		if s.tenant == tOther {
			continue
		}
		if s.end.Before(paused) {
			slowestHealthy = max(slowestHealthy, s.end.Sub(s.start))
		}
		if s.start.Before(paused) {
			continue
		}
		if !s.fromRedis() && s.end.Before(rejoining) {
			slowestGap = max(slowestGap, s.end.Sub(s.start))
		}
		if s.fromRedis() && s.start.After(killed) && (gapFirstOK.IsZero() || s.end.Before(gapFirstOK)) {
			gapFirstOK = s.end
		}
		if !s.fromRedis() && s.end.After(gapLastFail) {
			gapLastFail = s.end
		}
	}
	to, tc, tx := tallies[tOpen], tallies[tClosed], tallies[tOther]
	t.Logf("%d requests; fail-open %s: %d by Redis, %d by the fallback; fail-closed %s: %d by Redis, %d answered 503; %s (other master): %d by Redis, %d by the fallback",
		len(samples), tOpen, to.redis, to.fallback, tClosed, tc.redis, tc.closed503, tOther, tx.redis, tx.fallback)
	t.Logf("failover: writes paused %v before the kill; %d held reconciliations seen held %v after the kill, the failover let go then; cluster_state ok with the slots on the replica %v after the kill; "+
		"first request of the victim's tenants admitted by Redis %v after the kill, last one not admitted by Redis %v after it; "+
		"the restarted node was a replica %v after its restart",
		killed.Sub(paused).Round(time.Millisecond), heldByRedis, heldSeen.Sub(killed).Round(time.Millisecond), failedOver.Sub(killed).Round(time.Millisecond),
		gapFirstOK.Sub(killed).Round(time.Millisecond), gapLastFail.Sub(killed).Round(time.Millisecond),
		rejoined.Sub(rejoining).Round(time.Millisecond))
	errs := m["llmguard_store_errors_total"]
	t.Logf("slowest request of the victim's tenants: %v while healthy, %v among those not admitted by Redis; "+
		"failed takes: %v timeouts, %v connection, %v other; failed reconciliation batches: %v; reconciler %+v",
		slowestHealthy.Round(time.Millisecond), slowestGap.Round(time.Millisecond),
		errs.sum(map[string]string{"op": "take", "kind": "timeout"}), errs.sum(map[string]string{"op": "take", "kind": "connection"}),
		errs.sum(map[string]string{"op": "take", "kind": "other"}), errs.sum(map[string]string{"op": "reconcile"}), async.Stats())
	if to.fallback == 0 {
		t.Error("the fail-open limit never admitted from the fallback: the gap was not seen")
	}
	if tc.closed503 == 0 {
		t.Error("the fail-closed limit never answered 503: the gap was not seen")
	}
	// The fallback admissions and 503s are the decisions the meter counted.
	failures := m["llmguard_store_failure_decisions_total"]
	for _, c := range []struct {
		limit, decision string
		want            int
	}{{"open-quota", "fail_open", to.fallback}, {"closed-quota", "fail_closed", tc.closed503}, {"other-quota", "fail_open", tx.fallback}} {
		if got := failures.sum(map[string]string{"limit": c.limit, "decision": c.decision}); got != float64(c.want) {
			t.Errorf("store_failure_decisions_total{limit=%s,decision=%s} = %v, want %d (as the responses said)", c.limit, c.decision, got, c.want)
		}
	}

	// No delta lost: every settled request's use is in Redis, whichever
	// store admitted it, exactly once, and in the fallback when the
	// fallback admitted it.
	ctx := context.Background()
	rc := cluster.Client()
	redisUsed := func(tenant string) int64 {
		t.Helper()
		v, err := rc.Get(ctx, keyOf[tenant]).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", keyOf[tenant], err)
		}
		f := strings.Fields(v)
		if len(f) != 3 || f[0] != "q" {
			t.Fatalf("%s = %q, not a quota", keyOf[tenant], v)
		}
		used, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", keyOf[tenant], v, err)
		}
		return used
	}
	limitOf := map[string]bucket.Limit{}
	for _, r := range h.app.pol.Load().Rules() {
		limitOf[r.Name] = r.LimitAt(frozen)
	}
	ruleOf := map[string]string{tOpen: "open-quota", tClosed: "closed-quota", tOther: "other-quota"}
	fallbackUsed := func(tenant string) int64 {
		t.Helper()
		// Held, not a take: a take would first seed the bucket from the
		// node's last reading of Redis (bucket.Fallback.ObserveLevels).
		held, err := h.app.stores.fallback.(*bucket.Fallback).Held(ctx, keyOf[tenant], limitOf[ruleOf[tenant]])
		d := bucket.Decision{Buckets: []bucket.Status{held}}
		if err != nil || len(d.Buckets) != 1 {
			t.Fatalf("reading the fallback's %s: %+v, %v", keyOf[tenant], d, err)
		}
		return failoverQuota/2 - d.Buckets[0].Remaining
	}
	for _, tenant := range tenants {
		ta := tallies[tenant]
		if got, want := redisUsed(tenant), int64(ta.redis+ta.fallback)*failoverUsed; got != want {
			t.Errorf("%s: %d tokens used in Redis, want %d ((%d requests admitted by Redis + %d by the fallback) × %d): off by %d",
				tenant, got, want, ta.redis, ta.fallback, failoverUsed, got-want)
		}
		// The fallback's bucket started at the node's last reading of Redis
		// (bucket.Fallback.ObserveLevels) once it served the tenant: what
		// it holds is that start's shortfall from the share plus its own
		// spend; the spend alone is checked in Redis above, charged back.
		if got, want := fallbackUsed(tenant), int64(ta.fallback)*failoverUsed; got != want && (ta.fallback == 0 || got < want || got > want+failoverQuota/2) {
			t.Errorf("%s: %d tokens used in the fallback, want %d (%d requests admitted by the fallback × %d): off by %d",
				tenant, got, want, ta.fallback, failoverUsed, got-want)
		}
	}

	// Redis enforces both limits again: with less than a reservation left
	// in Redis, the next request is denied (the fallback would admit it; a
	// 503 would say the store is still failing).
	for deadline := time.Now().Add(30 * time.Second); readyz(t, h.admin)["breaker"] != "closed"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %v 30 s after the load", readyz(t, h.admin)["breaker"])
		}
	}
	for _, tenant := range []string{tOpen, tClosed} {
		v, _ := rc.Get(ctx, keyOf[tenant]).Result()
		f := strings.Fields(v)
		left := int64(failoverInput + failoverMaxTokens - 1)
		if err := rc.Set(ctx, keyOf[tenant], fmt.Sprintf("q %d %s", failoverQuota-left, f[2]), redis.KeepTTL).Err(); err != nil {
			t.Fatal(err)
		}
		if s := post(tenant); s.status != 429 {
			t.Errorf("%s: with %d tokens left in Redis a request of %d got %d (remaining %d), want 429 from Redis",
				tenant, left, failoverInput+failoverMaxTokens, s.status, s.remaining)
		}
	}
}

// reconcilerOf is h's asynchronous reconciler (a Redis store's).
func reconcilerOf(h *harness) *bucket.AsyncReconciler { return h.app.stores.async }

// holdingUpstream is an upstream in front of the mock that forwards every
// request to it at once, but keeps the answer of a request carrying
// x-test-hold until releaseAll: a call that llmguard admitted and settles
// only when the test says.
type holdingUpstream struct {
	url     string
	arrived chan struct{} // one value per held request that reached it
	release chan struct{}
	once    sync.Once
}

func startHoldingUpstream(t *testing.T, mockURL string) *holdingUpstream {
	t.Helper()
	target, err := url.Parse(mockURL)
	if err != nil {
		t.Fatal(err)
	}
	u := &holdingUpstream{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Header.Get("x-test-hold") != "" {
			<-u.release
		}
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-test-hold") != "" {
			select {
			case u.arrived <- struct{}{}:
			default:
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		u.releaseAll()
		srv.Close()
	})
	u.url = "http://" + ln.Addr().String()
	return u
}

// releaseAll lets every held answer go, now and from now on.
func (u *holdingUpstream) releaseAll() { u.once.Do(func() { close(u.release) }) }

// clusterTenant returns the first tenant name t<n> not in not whose hash
// tag {t<n>} lives on victim (onVictim) or on another master (not
// onVictim), failing t when none of the first 200 does.
func clusterTenant(t *testing.T, cluster *redistest.Cluster, victim *redistest.Server, onVictim bool, not ...string) string {
	t.Helper()
	for n := range 200 {
		name := fmt.Sprintf("t%d", n)
		if !slices.Contains(not, name) && (cluster.MasterOf("{"+name+"}") == victim) == onVictim {
			return name
		}
	}
	t.Fatal("no tenant name found for the layout")
	return ""
}
