package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The store deadline of these tests. The requirement itself is a deadline:
// a call must not wait for a Redis that is down or stuck. A call's time on
// this machine is bounded by the slowest healthy call measured in the same
// run (the machine's noise: scheduling, the race detector) plus the
// deadline plus half of what waiting on Redis would have cost — never by a
// fixed figure, which a loaded machine breaks.
const guardTimeout = 5 * time.Millisecond

// healthySlowest is the slowest of n takes through g while Redis is up.
func healthySlowest(t *testing.T, g *bucket.Guarded, items []bucket.Item, n int) time.Duration {
	t.Helper()
	var slowest time.Duration
	for range n {
		took, err := timedTake(g, items)
		if err != nil {
			continue // a healthy take may miss a 5 ms deadline on a loaded machine
		}
		slowest = max(slowest, took)
	}
	return slowest
}

// guardClient returns a client of s set up as the proxy's should be: the
// context's deadline bounds every read, write and dial (go-redis closes a
// connection whose read timed out, so the next call dials again); no
// retries, which would outlive the deadline, of commands or of dials (by
// default go-redis tries a refused dial 5 times, 100ms apart, so a call to
// a Redis that is down would always take its whole deadline); generous
// socket timeouts, which only bound calls without a deadline.
func guardClient(t *testing.T, s *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		PoolSize:              8,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// warmUp waits until a Take through g succeeds: the first ones dial and
// load scripts, which may not fit the deadline on a loaded machine.
func warmUp(t *testing.T, g *bucket.Guarded, items []bucket.Item) {
	t.Helper()
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err = g.Take(context.Background(), "", items); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("take while Redis is up: %v", err)
}

// timedTake runs one Take and returns its error and how long it took.
func timedTake(g *bucket.Guarded, items []bucket.Item) (time.Duration, error) {
	t0 := time.Now()
	_, err := g.Take(context.Background(), "", items)
	return time.Since(t0), err
}

// TestGuardedRedisKilled kills Redis under a Guarded store: every Take
// returns within its deadline, the breaker opens, reconciliations are held;
// after a restart the breaker closes within OpenFor (plus go-redis's dial
// back-off) and the held reconciliations land, once each.
func TestGuardedRedisKilled(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	c := guardClient(t, s)
	const openFor = 300 * time.Millisecond
	var tr transitions
	g := bucket.NewGuarded(newRedis(t, bucket.RedisOptions{Client: c}),
		bucket.GuardOptions{Timeout: guardTimeout, MinCalls: 5, OpenFor: openFor, OnStateChange: tr.record})
	a := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{RetryEvery: 10 * time.Millisecond})
	defer a.Close()

	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	items := []bucket.Item{{Key: "{t}:k", Limit: limit, Cost: 1}}
	warmUp(t, g, items)
	healthy := healthySlowest(t, g, items, 50)

	s.Kill()
	var slowest time.Duration
	for i := range 50 {
		took, err := timedTake(g, items)
		if !errors.Is(err, bucket.ErrUnavailable) {
			t.Fatalf("take %d with Redis killed: %v, want ErrUnavailable", i, err)
		}
		slowest = max(slowest, took)
	}
	t.Logf("slowest of 50 takes with Redis killed: %v (healthy: %v); errors by kind %v", slowest, healthy, g.Stats().Errors)
	// Waiting on the dead Redis would cost go-redis's 1 s dial or I/O timeout.
	if bound := healthy + guardTimeout + 500*time.Millisecond; slowest > bound {
		t.Errorf("slowest take with Redis killed took %v, want under %v (the slowest healthy take + the deadline + half the 1 s timeout it must not wait for)", slowest, bound)
	}
	if g.State() != bucket.BreakerOpen {
		t.Fatalf("breaker %v after 50 failed takes, want open", g.State())
	}
	if st := g.Stats(); st.Calls[bucket.OpTake][bucket.ResultRejected] < 40 {
		t.Errorf("takes by result %v: want most of them rejected without a call", st.Calls[bucket.OpTake])
	}

	const n = 20
	for i := range n {
		delta := []bucket.Delta{{Key: "{t}:k", Limit: limit, Units: 10}}
		if err := a.Reconcile(ctx, fmt.Sprintf("req-%d", i), delta); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "every reconciliation held", func() bool { return a.Stats().Held == n })

	s.Restart()
	back := time.Now()
	// The held reconciliations' retries are the probes. go-redis, having
	// failed PoolSize dials, fails fast until its own background dial (once
	// a second) succeeds: allow for it.
	waitState(t, g, bucket.BreakerClosed, openFor+10*time.Second) // generous: a loaded machine delays every step
	t.Logf("breaker closed %v after Redis came back", time.Since(back))
	waitFor(t, 5*time.Second, "every reconciliation applied", func() bool { return a.Stats().Applied == n })
	if st := a.Stats(); st.Dropped != 0 || st.Pending != 0 {
		t.Errorf("reconciler after recovery: %+v; want nothing dropped or pending", st)
	}

	// Redis lost its data with the kill: the bucket holds exactly the
	// replayed deltas, once each (a second replay of an id is a no-op).
	for i := range n {
		delta := []bucket.Delta{{Key: "{t}:k", Limit: limit, Units: 10}}
		if err := g.Reconcile(ctx, fmt.Sprintf("req-%d", i), delta); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := c.Get(ctx, "{t}:k").Result()
	if err != nil {
		t.Fatalf("read the bucket back: %v", err)
	}
	level, err := strconv.ParseFloat(strings.Fields(raw)[0], 64)
	if err != nil {
		t.Fatalf("bucket %q: %v", raw, err)
	}
	if want := float64(limit.Capacity - n*10); math.Abs(level-want) > 1 {
		t.Errorf("bucket level %v after the replay, want %v", level, want)
	}
	t.Logf("transitions: %v", tr.list())
}

// slowRedis blocks s for d: DEBUG SLEEP where DEBUG is enabled, else (Redis
// 7 disables DEBUG by default) a script that spins for d, which blocks
// Redis's one thread just the same. It returns how long the server was
// blocked, as its client saw it.
func slowRedis(s *redistest.Server, d time.Duration) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 5 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	t0 := time.Now()
	err := c.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', -1, 64)).Err()
	if err != nil && strings.Contains(err.Error(), "not allowed") {
		t0 = time.Now()
		err = c.Eval(ctx, `
local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1`, nil, d.Microseconds()).Err()
	}
	return time.Since(t0), err
}

// TestGuardedRedisSlow blocks Redis for 200ms while Takes with a 5ms
// deadline run: each fails at its deadline, not after 200ms, then the
// breaker opens and they fail at once; once Redis answers again the
// breaker closes.
func TestGuardedRedisSlow(t *testing.T) {
	s := redistest.Start(t)
	c := guardClient(t, s)
	const openFor = 100 * time.Millisecond
	g := bucket.NewGuarded(newRedis(t, bucket.RedisOptions{Client: c}),
		bucket.GuardOptions{Timeout: guardTimeout, MinCalls: 5, OpenFor: openFor})
	items := []bucket.Item{{Key: "{t}:slow", Limit: bucket.Limit{Capacity: 1 << 40, Rate: 1, Per: time.Second}, Cost: 1}}
	warmUp(t, g, items)
	healthy := healthySlowest(t, g, items, 50)
	before := g.Stats()

	// Blocked for far longer than the deadline, so that a take that waited
	// on it stands out from one a loaded machine (CI's) merely scheduled
	// late: 200 ms left a take delayed 168 ms by a loaded scheduler, under
	// -race, over the bound below.
	const sleep = time.Second
	type result struct {
		took time.Duration
		err  error
	}
	slept := make(chan result, 1)
	go func() {
		took, err := slowRedis(s, sleep)
		slept <- result{took, err}
	}()

	// Take until Redis is seen stuck (a take times out), then 20 more.
	var (
		slowest time.Duration
		after   = -1
	)
	deadline := time.Now().Add(10 * time.Second)
	for after < 20 {
		if time.Now().After(deadline) {
			t.Fatal("no take timed out within 10s of blocking Redis")
		}
		took, _ := timedTake(g, items)
		slowest = max(slowest, took)
		if after >= 0 || g.Stats().Errors[bucket.KindTimeout] > before.Errors[bucket.KindTimeout] {
			after++
		}
	}
	r := <-slept
	if r.err != nil {
		t.Fatalf("blocking Redis: %v", r.err)
	}
	if r.took < sleep*3/4 {
		t.Fatalf("Redis was blocked for only %v", r.took)
	}
	st := g.Stats()
	t.Logf("Redis blocked %v; takes by result %v, errors by kind %v; slowest take %v (healthy: %v)",
		r.took, st.Calls[bucket.OpTake], st.Errors, slowest, healthy)
	// Waiting on the blocked Redis would cost up to its 1 s sleep.
	if bound := healthy + guardTimeout + sleep/2; slowest > bound {
		t.Errorf("slowest take while Redis was blocked took %v, want under %v (the slowest healthy take + the deadline + half the block it must not wait for)", slowest, bound)
	}
	if st.Opened == before.Opened || st.Calls[bucket.OpTake][bucket.ResultRejected] == before.Calls[bucket.OpTake][bucket.ResultRejected] {
		t.Errorf("breaker never opened: %+v", st)
	}

	// Redis answers again: a probe after OpenFor closes the breaker.
	deadline = time.Now().Add(openFor + 10*time.Second)
	for {
		if _, err := g.Take(context.Background(), "", items); err == nil && g.State() == bucket.BreakerClosed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker %v %v after Redis unblocked", g.State(), openFor+10*time.Second)
		}
		time.Sleep(time.Millisecond)
	}
}
