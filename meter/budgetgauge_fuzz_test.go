package meter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// gaugeOracle is the budget gauge without a bound: every bucket's latest
// level, the most used one reported. It is what keepLevel approximates.
type gaugeOracle map[string]subjectLevel

// observe is keepLevel without a bound: l replaces its key's level unless
// that one is of a later period.
func (o gaugeOracle) observe(l subjectLevel) {
	if old, ok := o[l.key]; ok && old.start.After(l.start) {
		return
	}
	o[l.key] = l
}

// best is the highest share among levels whose period has not ended at
// now, and whether there is one.
func (o gaugeOracle) best(now time.Time) (float64, bool) {
	best, ok := 0.0, false
	for _, l := range o {
		if now.Before(l.end) && (!ok || l.share() > best) {
			best, ok = l.share(), true
		}
	}
	return best, ok
}

// FuzzBudgetGaugeBounded drives a table of max levels and the unbounded
// oracle with the same observations (a key, a used level, a period, a
// clock step), each byte triple one step, and checks after each: the table
// never holds more than max levels, never two of one key; what it reports
// is a level the oracle holds for the current period (never more than the
// oracle's highest, never a past period's); and exactly the oracle's
// highest while no more than max keys have been seen, or whatever their
// number when no key's level falls within a period (monotone: spend only
// grows, the common case; a level falls only when reservations other
// requests held at its admission are settled lower).
func FuzzBudgetGaugeBounded(f *testing.F) {
	f.Add(uint8(2), false, []byte{0, 90, 0, 1, 10, 0, 2, 50, 0, 0, 20, 0})
	f.Add(uint8(1), true, []byte{0, 200, 0, 1, 10, 1, 0, 5, 0, 1, 7, 2})
	f.Add(uint8(3), true, []byte{0, 255, 3, 1, 1, 3, 2, 2, 3, 3, 3, 3, 4, 4, 7})
	f.Add(uint8(2), true, []byte{0, 10, 0, 1, 20, 0, 2, 30, 0, 3, 40, 0, 0, 90, 0, 4, 5, 0})
	f.Fuzz(func(t *testing.T, max uint8, monotone bool, steps []byte) {
		max = max%8 + 1
		day := 24 * time.Hour
		origin := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
		now := origin
		g := newBudgetGauges(func() time.Time { return now }, int(max))
		rule := &policy.Rule{Name: "q", Scope: policy.ScopeUser, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC,
			Limit: bucket.Limit{Capacity: 200}}
		oracle := gaugeOracle{}
		keys := map[string]bool{}
		for i := 0; i+2 < len(steps); i += 3 {
			key := string(rune('a' + steps[i]%16))
			used := int64(steps[i+1])
			if steps[i+2]&4 != 0 { // the clock moves on: a few hours
				now = now.Add(time.Duration(steps[i+2]>>3) * time.Hour)
			}
			start := origin.Add(day * time.Duration(now.Sub(origin)/day)) // the period now is in
			if steps[i+2]&3 == 3 && start.After(origin) {
				start = start.Add(-day) // a request of the previous period settling late
			}
			if old, ok := oracle[key]; monotone && ok && old.start.Equal(start) {
				used = old.used + used%8 // spend only grows within a period
			}
			a := &Applied{Rule: rule, Key: key, Limit: bucket.Quota(200, start, start.Add(day))}
			if now.Before(start.Add(day)) { // observe ignores a past period, as the oracle must
				oracle.observe(subjectLevel{key: key, used: used, capacity: 200, start: start, end: start.Add(day)})
				keys[key] = true
			}
			g.observe(a, "acme", used, 0, now)

			if v, ok := g.groups.Load(quotaGroup{"q", "acme"}); ok {
				s := v.(*quotaSeries)
				if len(s.subjects) > int(max) {
					t.Fatalf("step %d: %d levels kept, max %d", i/3, len(s.subjects), max)
				}
				seen := map[string]bool{}
				for _, l := range s.subjects {
					if seen[l.key] {
						t.Fatalf("step %d: two levels of %q", i/3, l.key)
					}
					seen[l.key] = true
				}
			}
			rows := g.rows(now)
			want, ok := oracle.best(now)
			if len(rows) == 0 {
				if ok {
					t.Fatalf("step %d: no series, the oracle has %v", i/3, want)
				}
				continue
			}
			got := float64(rows[0].used) / float64(rows[0].capacity)
			if !rows[0].end.After(now) {
				t.Fatalf("step %d: a series of a period ended at %v (now %v)", i/3, rows[0].end, now)
			}
			switch {
			case !ok && got != 0:
				t.Fatalf("step %d: %v reported, no level of this period", i/3, got)
			case ok && got > want:
				t.Fatalf("step %d: %v reported, above the highest level %v", i/3, got, want)
			case ok && (monotone || len(keys) <= int(max)) && got != want:
				t.Fatalf("step %d: %v reported, the highest of %d keys (max %d) is %v", i/3, got, len(keys), max, want)
			}
			if got > 0 {
				found := false
				for _, l := range oracle {
					found = found || (now.Before(l.end) && l.share() == got)
				}
				if !found {
					t.Fatalf("step %d: %v reported is no current level", i/3, got)
				}
			}
		}
	})
}

// After a reload, a limit that is no longer a quota loses its series, and
// a limit that became a quota keeps only its quota series (not a token
// bucket's limit_utilization set under its name before); a global quota
// is shown under tenant "" whatever tenant spent from it; a request
// admitted by the per-node fallback is not shown.
func TestBudgetGaugeReloadGlobalFallback(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	m := newGaugeMetrics(t, reg, func() time.Time { return now })
	rules := []policy.Rule{
		{Name: "daily", Scope: policy.ScopeTenant, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC, Limit: bucket.Limit{Capacity: 100}},
		{Name: "world", Scope: policy.ScopeGlobal, Unit: policy.UnitTokens, Period: policy.PeriodDay, Location: time.UTC, Limit: bucket.Limit{Capacity: 100}},
		{Name: "tpm", Scope: policy.ScopeTenant, Unit: policy.UnitTokens, Limit: bucket.Limit{Capacity: 100, Rate: 100, Per: time.Minute}},
	}
	m.Prepare(rules)
	applied := func(r *policy.Rule, used int64) Applied {
		l := r.LimitAt(now)
		return Applied{Rule: r, Key: r.Name, Limit: l, Reserved: 10, Status: bucket.Status{Remaining: l.Capacity - used}}
	}
	for _, tenant := range []string{"acme", "globex"} {
		x := &Exchange{}
		x.req.Principal.Tenant = tenant
		x.rules = []Applied{applied(&rules[0], 40), applied(&rules[1], 70), applied(&rules[2], 50)}
		m.admitted(x)
		m.budgetSettled(x, []int64{10, 10, 10})
	}
	fb := &Exchange{fallback: true}
	fb.req.Principal.Tenant = "initech"
	fb.rules = []Applied{applied(&rules[0], 90)}
	fb.rules[0].Fallback = true // as take sets it: the rule judged by the fallback
	m.budgetSettled(fb, []int64{10})
	for _, c := range []struct {
		limit, tenant string
		want          float64
		present       bool
	}{
		{"daily", "acme", 0.4, true},
		{"world", "", 0.7, true},
		{"world", "acme", 0, false},
		{"tpm", "globex", 0.5, true},
		{"daily", "initech", 0, false},
	} {
		got, ok := gaugeValue(t, reg, "llmguard_limit_utilization", map[string]string{"limit": c.limit, "tenant": c.tenant})
		if ok != c.present || got != c.want {
			t.Errorf("utilization{%s,%s} = %v (present %v), want %v (present %v)", c.limit, c.tenant, got, ok, c.want, c.present)
		}
	}
	// The reload: daily goes, tpm becomes a quota. A request admitted
	// before it settles (and sets tpm's token-bucket series) after it.
	late := &Exchange{}
	late.req.Principal.Tenant = "acme"
	late.rules = []Applied{applied(&rules[2], 60)}
	reloaded := []policy.Rule{rules[1], {Name: "tpm", Scope: policy.ScopeTenant, Unit: policy.UnitTokens, Period: policy.PeriodDay,
		Location: time.UTC, Limit: bucket.Limit{Capacity: 1000}}}
	m.Prepare(reloaded)
	m.admitted(late)
	q := &Exchange{}
	q.req.Principal.Tenant = "acme"
	q.rules = []Applied{applied(&reloaded[1], 300)}
	m.budgetSettled(q, []int64{10})
	if n := testutil.CollectAndCount(m.budget, "llmguard_quota_used"); n != 2 {
		t.Errorf("%d quota_used series after the reload, want 2 (world, tpm{acme})", n)
	}
	if got, ok := gaugeValue(t, reg, "llmguard_limit_utilization", map[string]string{"limit": "tpm", "tenant": "acme"}); !ok || got != 0.3 {
		t.Errorf("tpm{acme} after the reload: %v (present %v), want the quota's 0.3", got, ok)
	}
	if _, ok := gaugeValue(t, reg, "llmguard_quota_used", map[string]string{"limit": "daily"}); ok {
		t.Error("daily, dropped by the reload, still has a series")
	}
}
