package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestChaosFallbackSpendCharged: what the fallback admits against a quota
// while Redis is dead is charged to the quota in Redis once it is back —
// Redis restarts empty here, so its use is exactly the outage's spend,
// once (a second outage charges only its own spend, never the first's
// again) — and spend whose day ended before Redis came back is dropped and
// counted (llmguard_fallback_charges_dropped_total{reason="period_ended"}),
// never charged to the next day.
func TestChaosFallbackSpendCharged(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	srv := redistest.Start(t)
	mock := startMock(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-acme, user: alice, tenant: acme}
limits:
  - {name: acme-day, scope: tenant, unit: requests, quota: 1000, period: day, on_failure: open}
store:
  backend: redis
  redis_url: "redis://%s/0"
  nodes: 2
  timeout: 2s
  breaker: {min_calls: 3, open_for: 200ms}
`, mock.URL, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	var clockMu sync.Mutex
	clock := time.Now().UTC()
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	h := startClock(t, mock, cfg, discardLog(), now)
	ctx := context.Background()

	send := func(step string, n int) {
		t.Helper()
		for i := range n {
			if resp, body := h.post("sk-acme", hiBody); resp.StatusCode != 200 {
				t.Fatalf("%s: request %d: %d %s", step, i, resp.StatusCode, body)
			}
		}
	}
	// used is the quota's use in Redis for the day of now (0: no key).
	used := func(step string) int64 {
		t.Helper()
		keys, err := srv.Client().Keys(ctx, "llmguard:{acme}:acme-day*").Result()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(keys) > 1 {
			t.Fatalf("%s: keys %q", step, keys)
		}
		if len(keys) == 0 {
			return 0
		}
		v, err := srv.Client().Get(ctx, keys[0]).Result()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		f := strings.Fields(v) // "q <used> <window µs>"
		if len(f) != 3 || f[0] != "q" {
			t.Fatalf("%s: %s holds %q", step, keys[0], v)
		}
		u, _ := strconv.ParseInt(f[1], 10, 64)
		return u
	}
	metric := func(family, label, value string) float64 {
		v, _ := gathered(t, h.app.Registry, family, map[string]string{label: value})
		return v
	}
	// backAndCharged sends a request at a time until the breaker is closed
	// and nothing is held, and returns how many it sent: each counts in
	// Redis too, taken there or charged from the fallback.
	backAndCharged := func(step string) int64 {
		t.Helper()
		var sent int64
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := readyz(t, h.admin)
			if r["breaker"] == "closed" && r["fallback_charges_held"] == float64(0) && r["degraded"] == false {
				return sent
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not charged 20 s after Redis restarted: %v", step, r)
			}
			send(step+" (a request closes the breaker)", 1)
			sent++
		}
	}
	// waitUsed waits until the quota's use in Redis is want (a request's
	// settlement, and so its charge, may follow its answer by a moment).
	waitUsed := func(step string, want int64) {
		t.Helper()
		var u int64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if u = used(step); u == want {
				return
			}
		}
		t.Fatalf("%s: used %d, want %d", step, u, want)
	}

	// The store's timeout is 2 s, not the default 50 ms: on a loaded machine
	// (trial16: load average 12 to 25) a take on a live Redis overran 50
	// ms, went to the fallback, and Redis showed 0 used right after (a
	// dead Redis refuses the connection at once, so the outages below are
	// not slowed by it).
	send("step 1 (Redis up)", 3)
	waitUsed("step 1 (Redis up)", 3)

	srv.Kill()
	send("step 2 (Redis dead: the fallback admits)", 10)
	srv.Restart() // empty: Redis keeps no data here
	n := backAndCharged("step 3")
	waitUsed("step 3 (Redis back: the outage's 10, and the requests since)", 10+n)
	if a := metric("llmguard_fallback_charges_total", "outcome", "applied"); a < 1 {
		t.Fatalf("step 3: charges applied %v, want at least 1", a)
	}

	// A second outage charges its own spend, and only it.
	srv.Kill()
	send("step 4 (Redis dead again)", 4)
	srv.Restart()
	n = backAndCharged("step 4")
	waitUsed("step 4 (Redis back again: 4 and the requests since, not the first outage's 10)", 4+n)

	// Spend of a day that ends before Redis is back is dropped, counted.
	srv.Kill()
	send("step 5 (Redis dead, last day)", 6)
	clockMu.Lock()
	clock = clock.AddDate(0, 0, 1)
	clockMu.Unlock()
	srv.Restart()
	n = backAndCharged("step 5")
	waitUsed("step 5 (next day: its requests alone, not the last day's 6)", n)
	if d := metric("llmguard_fallback_charges_dropped_total", "reason", "period_ended"); d != 1 {
		t.Fatalf("step 5: dropped for their period %v, want 1", d)
	}
}
