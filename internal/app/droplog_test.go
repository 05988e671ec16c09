package app

import (
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
)

// Drops are logged at a bounded rate, each line with the counts by reason
// since the one before: 200 drops over a run write at most 1 + run/every
// lines (the bound measured in the same run), the counts they carry add up
// to the 200, and drops left when it stops are logged by its last look.
// Counts present at the start are not logged. Before, every dropped
// reconciliation wrote an ERROR line of its own, and a fallback charge
// dropped as expired, full or refused wrote none.
func TestDropsLoggedAtABoundedRate(t *testing.T) {
	var full, expired atomic.Uint64
	full.Store(7) // before the start: not logged
	read := func() []uint64 { return []uint64{full.Load(), 0, expired.Load()} }
	var logs syncBuffer
	const every = 50 * time.Millisecond
	began := time.Now()
	stop := logDrops(slog.New(slog.NewTextHandler(&logs, nil)), "things dropped", []string{"full", "closed", "expired"}, read, every, 5*time.Millisecond)
	for i := range 200 {
		if i%2 == 0 {
			full.Add(1)
		} else {
			expired.Add(1)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	elapsed := time.Since(began)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if most := 1 + int(elapsed/every) + 1; len(lines) > most || len(lines) < 2 {
		t.Errorf("%d lines in %v (every %v): want 2 to %d:\n%s", len(lines), elapsed, every, most, logs.String())
	}
	sum := map[string]int{}
	for _, l := range lines {
		if !strings.Contains(l, "level=WARN") || !strings.Contains(l, `msg="things dropped"`) || strings.Contains(l, "dropped_closed") {
			t.Errorf("line %q: want a WARN of things dropped, no reason that did not grow", l)
		}
		for _, f := range strings.Fields(l) {
			for _, r := range []string{"full", "expired"} {
				if v, ok := strings.CutPrefix(f, "dropped_"+r+"="); ok {
					n, _ := strconv.Atoi(v)
					sum[r] += n
				}
			}
		}
	}
	if sum["full"] != 100 || sum["expired"] != 100 || !strings.Contains(lines[len(lines)-1], "dropped_since_start=207") {
		t.Errorf("logged counts %v (want 100 full, 100 expired), last line %q (want dropped_since_start=207)", sum, lines[len(lines)-1])
	}
}

// llmguard_reconcile_dropped_total has a reason label, every reason
// exported from the start, and counts each drop under its own: a
// reconciliation the store applied to a quota period it had moved past
// under period_moved (the store's count).
func TestReconcileDroppedByReason(t *testing.T) {
	day1 := time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	inner := bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return day2 }})
	defer inner.Close()
	a := bucket.NewAsyncReconciler(inner, bucket.AsyncOptions{})
	reg := prometheus.NewRegistry()
	(&storeMetrics{}).watchDrops(reg, a, inner.PeriodMoved)
	if _, err := a.Take(t.Context(), "", []bucket.Item{{Key: "q", Limit: bucket.Quota(10, day2, day2.AddDate(0, 0, 1)), Cost: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Reconcile(t.Context(), "day1", []bucket.Delta{{Key: "q", Limit: bucket.Quota(10, day1, day2), Units: 2}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := a.Reconcile(t.Context(), "late", []bucket.Delta{{Key: "k", Limit: bucket.Limit{Capacity: 1, Rate: 1, Per: time.Second}, Units: 1}}); err == nil {
		t.Fatal("a reconcile after Close was accepted")
	}
	want := map[string]float64{bucket.AsyncDropClosed.String(): 1, "period_moved": 1}
	for _, reason := range reconcileDropReasons() {
		if v, ok := gathered(t, reg, "llmguard_reconcile_dropped_total", map[string]string{"reason": reason}); !ok || v != want[reason] {
			t.Errorf("llmguard_reconcile_dropped_total{reason=%q} = %v (exported: %v), want %v", reason, v, ok, want[reason])
		}
	}
}

// The memory backend exports llmguard_reconcile_dropped_total too, every
// reason from the start, and counts a settlement whose quota period had
// turned under period_moved; /readyz says reconcile_period_moved. Before,
// the memory backend exported no such family and the count was invisible.
func TestMemoryBackendCountsPeriodMoved(t *testing.T) {
	day1 := time.Date(2025, time.March, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	var now atomic.Pointer[time.Time]
	now.Store(&day2)
	cfg := &config.Config{Store: config.Store{Backend: "memory"}}
	reg := prometheus.NewRegistry()
	st, err := openStore(cfg, func() *policy.Policy { return nil }, reg, slog.New(slog.DiscardHandler), func() time.Time { return *now.Load() })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range st.close {
			c()
		}
	}()
	for _, reason := range reconcileDropReasons() {
		if v, ok := gathered(t, reg, "llmguard_reconcile_dropped_total", map[string]string{"reason": reason}); !ok || v != 0 {
			t.Errorf("at start llmguard_reconcile_dropped_total{reason=%q} = %v (exported: %v), want 0", reason, v, ok)
		}
	}
	dayStart := time.Date(2025, time.March, 2, 0, 0, 0, 0, time.UTC)
	if _, err := st.main.Take(t.Context(), "", []bucket.Item{{Key: "q", Limit: bucket.Quota(10, dayStart, dayStart.AddDate(0, 0, 1)), Cost: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.main.Reconcile(t.Context(), "day1", []bucket.Delta{{Key: "q", Limit: bucket.Quota(10, dayStart.AddDate(0, 0, -1), dayStart), Units: 2}}); err != nil {
		t.Fatal(err)
	}
	if v, _ := gathered(t, reg, "llmguard_reconcile_dropped_total", map[string]string{"reason": "period_moved"}); v != 1 {
		t.Errorf("llmguard_reconcile_dropped_total{reason=\"period_moved\"} = %v, want 1", v)
	}
	if r := st.readiness("memory"); r["reconcile_period_moved"] != uint64(1) {
		t.Errorf("/readyz reconcile_period_moved = %v (%T), want 1", r["reconcile_period_moved"], r["reconcile_period_moved"])
	}
}
