package meter

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// quotaApplied is quota rule q's bucket key of a period of a day from
// start, as a settlement hands it to the budget gauges.
func quotaApplied(q *policy.Rule, key string, start time.Time) *Applied {
	return &Applied{Rule: q, Key: key, Limit: bucket.Quota(q.Limit.Capacity, start, start.Add(24*time.Hour))}
}

// TestBudgetGaugeSeriesLockIsItsOwn holds one series' lock and settles
// under another limit: the settlement must not wait for it. A gauge that
// serialised every settlement behind one process-wide lock (the code
// before) would hang here until the test's deadline.
func TestBudgetGaugeSeriesLockIsItsOwn(t *testing.T) {
	start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	g := newBudgetGauges(func() time.Time { return now }, defaultMaxSubjects)
	a := &policy.Rule{Name: "a", Scope: policy.ScopeTenant, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC, Limit: bucket.Limit{Capacity: 100}}
	b := &policy.Rule{Name: "b", Scope: policy.ScopeTenant, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC, Limit: bucket.Limit{Capacity: 100}}
	g.observe(quotaApplied(a, "ka", start), "acme", 10, 0, now)
	v, ok := g.groups.Load(quotaGroup{"a", "acme"})
	if !ok {
		t.Fatal("no series of limit a after a settlement under it")
	}
	held := v.(*quotaSeries)
	held.mu.Lock()
	done := make(chan struct{})
	go func() {
		g.observe(quotaApplied(b, "kb", start), "acme", 20, 0, now)
		g.observe(quotaApplied(b, "kb", start), "globex", 30, 0, now)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a deadlock guard, not a speed bound
		held.mu.Unlock()
		t.Fatal("a settlement under limit b waited for limit a's series")
	}
	held.mu.Unlock()
	got := map[quotaGroup]int64{}
	for _, r := range g.rows(now) {
		got[r.group] = r.used
	}
	want := map[quotaGroup]int64{{"a", "acme"}: 10, {"b", "acme"}: 20, {"b", "globex"}: 30}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

// TestBudgetGaugeConcurrentSettlements settles from many goroutines under
// several limits and tenants while scrapes and policy reloads run, then
// checks every series against what was settled: the most used key of
// each, and no series of the limit the last reload removed.
func TestBudgetGaugeConcurrentSettlements(t *testing.T) {
	start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)
	g := newBudgetGauges(func() time.Time { return now }, 4)
	rules := make([]policy.Rule, 3)
	for i := range rules {
		rules[i] = policy.Rule{Name: fmt.Sprintf("q%d", i), Scope: policy.ScopeUser, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC, Limit: bucket.Limit{Capacity: 1000}}
	}
	g.prepare(rules)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := &rules[(w+i)%len(rules)]
				tenant := fmt.Sprintf("t%d", i%2)
				// key u<w> reaches used w*10+i/100 at most: the
				// most used key of every series is u7.
				g.observe(quotaApplied(r, fmt.Sprintf("u%d", w), start), tenant, int64(w*10+i/100), 0, now)
				if i%50 == 0 {
					g.rows(now)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // reloads keep all three quotas
		defer wg.Done()
		for range 20 {
			g.prepare(rules)
		}
	}()
	wg.Wait()
	for _, r := range g.rows(now) {
		if r.used != 71 || r.capacity != 1000 {
			t.Errorf("series %v: used %d of %d, want 71 (key u7's last level) of 1000", r.group, r.used, r.capacity)
		}
	}
	if n := len(g.rows(now)); n != 6 {
		t.Errorf("%d series, want 3 limits × 2 tenants", n)
	}
	g.prepare(rules[:2]) // q2 is no longer a quota
	for _, r := range g.rows(now) {
		if r.group.limit == "q2" {
			t.Errorf("series %v of a removed limit", r.group)
		}
	}
	g.observe(quotaApplied(&rules[2], "u0", start), "t0", 5, 0, now) // a late settlement under the removed limit
	for _, r := range g.rows(now) {
		if r.group.limit == "q2" {
			t.Errorf("series %v of a removed limit after a late settlement", r.group)
		}
	}
}
