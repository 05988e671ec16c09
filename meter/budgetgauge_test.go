package meter

import (
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// gaugeValue is the value of family's series whose labels include want,
// and whether there is one, as reg exports it.
func gaugeValue(t testing.TB, reg prometheus.Gatherer, family string, want map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, p := range m.GetLabel() {
				got[p.GetName()] = p.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// gaugeRig is a Meter on a memory store and a clock the test moves
// (noon UTC, 2026-03-10), with alice and bob of tenant acme, gpt-4o-mini
// priced at $0.15 / $0.60 per million tokens, and the Metrics on the same
// clock, prepared with the policy's rules as the proxy does.
type gaugeRig struct {
	t       testing.TB
	clock   *storetest.Clock
	meter   *Meter
	policy  *policy.Policy
	reg     *prometheus.Registry
	ledger  *records
	callers map[string]policy.Principal
	metrics *Metrics
	n       int
}

// reload makes limits the rig's policy, preparing the Metrics with its
// rules as a config reload does.
func (r *gaugeRig) reload(limits string) {
	r.t.Helper()
	r.policy = gaugePolicy(r.t, limits)
	r.metrics.Prepare(r.policy.Rules())
}

// gaugePolicy compiles the rig's config with limits.
func gaugePolicy(t testing.TB, limits string) *policy.Policy {
	t.Helper()
	c, err := config.Parse([]byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: alice, tenant: acme}
  - {key: sk-b, user: bob, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
` + limits))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func newGaugeRig(t testing.TB, limits string) *gaugeRig {
	t.Helper()
	pol := gaugePolicy(t, limits)
	var err error
	r := &gaugeRig{t: t, policy: pol, reg: prometheus.NewRegistry(), ledger: &records{}, callers: map[string]policy.Principal{}}
	for user, key := range map[string]string{"alice": "sk-a", "bob": "sk-b"} {
		if r.callers[user], _ = pol.Identify(key); r.callers[user].User != user {
			t.Fatalf("%s unknown", key)
		}
	}
	r.clock = storetest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: r.clock.Now, SweepEvery: -1})
	t.Cleanup(func() { mem.Close() })
	metrics := newGaugeMetrics(t, r.reg, r.clock.Now)
	metrics.Prepare(pol.Rules())
	r.metrics = metrics
	if r.meter, err = New(Options{Store: mem, Ledger: r.ledger, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: r.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return r
}

// call admits a gpt-4o-mini chat of user reserving in input and out
// output tokens and settles it with the reported usage (in, used).
func (r *gaugeRig) call(user string, in, out, used int64) {
	r.t.Helper()
	r.n++
	x := r.meter.Admit(Request{ID: "req-" + user + "-" + string(rune('a'+r.n)), Principal: r.callers[user], Policy: r.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
	if x.Verdict() != Admitted {
		r.t.Fatalf("request %d of %s: %v, want admitted", r.n, user, x.Verdict())
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: in, OutputTokens: used}, Status: 200})
}

// gauge is family's value for limit and tenant acme (NaN when absent).
func (r *gaugeRig) gauge(family, limit string) float64 {
	r.t.Helper()
	v, ok := gaugeValue(r.t, r.reg, family, map[string]string{"limit": limit, "tenant": "acme"})
	if !ok {
		return math.NaN()
	}
	return v
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, math.Abs(want)) }

// The budget gauges show spend: three calls reserving 20 output tokens
// and using 15 leave the quota at what the ledger says they cost, not at
// the last admission's level with its whole reservation.
func TestBudgetGaugeIsSettledSpend(t *testing.T) {
	r := newGaugeRig(t, `  - {name: acme-daily-usd, scope: tenant, unit: usd, quota: 0.01, period: day}
`)
	for range 3 {
		r.call("alice", 1000, 2000, 150) // reserves 150 + 1200 µUSD, costs 150 + 90
	}
	var spent int64
	for _, rec := range r.ledger.all() {
		spent += rec.CostMicroUSD
	}
	if spent != 3*240 {
		t.Fatalf("ledger: %d µUSD spent, want 720", spent)
	}
	if got, want := r.gauge("llmguard_quota_used", "acme-daily-usd"), float64(spent)/1e6; !near(got, want) {
		t.Errorf("quota_used %v USD, want %v (settled spend)", got, want)
	}
	if got, want := r.gauge("llmguard_limit_utilization", "acme-daily-usd"), float64(spent)/10_000; !near(got, want) {
		t.Errorf("limit_utilization %v, want %v (spend / quota)", got, want)
	}
	if got := r.gauge("llmguard_quota_limit", "acme-daily-usd"); !near(got, 0.01) {
		t.Errorf("quota_limit %v USD, want 0.01", got)
	}
}

// A user-scoped quota's gauge is the most used user of the tenant: bob's
// small request after alice's large one does not flip it to bob's, and
// once bob spends more than alice it is bob's.
func TestBudgetGaugeMostUsedUser(t *testing.T) {
	r := newGaugeRig(t, `  - {name: user-daily-tokens, scope: user, unit: tokens, quota: 1000, period: day}
`)
	steps := []struct {
		name       string
		user       string
		in, used   int64
		wantTokens float64
	}{
		{"alice spends 228", "alice", 200, 28, 228},
		{"bob spends 13", "bob", 10, 3, 228},
		{"alice spends 10 more", "alice", 5, 5, 238},
		{"bob spends 300 more", "bob", 250, 50, 313},
	}
	for i, s := range steps {
		r.call(s.user, s.in, 50, s.used)
		if got := r.gauge("llmguard_quota_used", "user-daily-tokens"); !near(got, s.wantTokens) {
			t.Errorf("step %d (%s): quota_used %v tokens, want %v", i, s.name, got, s.wantTokens)
		}
		if got := r.gauge("llmguard_limit_utilization", "user-daily-tokens"); !near(got, s.wantTokens/1000) {
			t.Errorf("step %d (%s): limit_utilization %v, want %v", i, s.name, got, s.wantTokens/1000)
		}
	}
}

// At the end of its period a quota's gauges read 0, and its period end
// is the new period's, with no request in between.
func TestBudgetGaugeResetsAtPeriodEnd(t *testing.T) {
	r := newGaugeRig(t, `  - {name: acme-daily-tokens, scope: tenant, unit: tokens, quota: 1000, period: day}
  - {name: user-daily-tokens, scope: user, unit: tokens, quota: 1000, period: day}
`)
	r.call("alice", 900, 100, 100) // the whole quota: "exhausted"
	end := time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)
	for _, limit := range []string{"acme-daily-tokens", "user-daily-tokens"} {
		if got := r.gauge("llmguard_limit_utilization", limit); !near(got, 1) {
			t.Fatalf("%s before the period ends: utilization %v, want 1", limit, got)
		}
		if got := r.gauge("llmguard_quota_period_end_timestamp_seconds", limit); !near(got, float64(end.Unix())) {
			t.Fatalf("%s: period end %v, want %v", limit, got, end.Unix())
		}
	}
	r.clock.Set(end.Add(-time.Nanosecond))
	if got := r.gauge("llmguard_quota_used", "acme-daily-tokens"); !near(got, 1000) {
		t.Errorf("a nanosecond before the period ends: quota_used %v, want 1000", got)
	}
	r.clock.Set(end.Add(8 * time.Second))
	for _, limit := range []string{"acme-daily-tokens", "user-daily-tokens"} {
		for _, c := range []struct {
			family string
			want   float64
		}{
			{"llmguard_quota_used", 0},
			{"llmguard_limit_utilization", 0},
			{"llmguard_quota_limit", 1000},
			{"llmguard_quota_period_end_timestamp_seconds", float64(end.Add(24 * time.Hour).Unix())},
		} {
			if got := r.gauge(c.family, limit); !near(got, c.want) {
				t.Errorf("%s 8 s into the next period, no request since: %s = %v, want %v", limit, c.family, got, c.want)
			}
		}
	}
	r.call("bob", 10, 10, 5) // the new period counts afresh
	if got := r.gauge("llmguard_quota_used", "acme-daily-tokens"); !near(got, 15) {
		t.Errorf("after a request in the new period: quota_used %v, want 15", got)
	}
}

// A reload that changes a quota shows at once in its gauges, with no
// request settled under the new rule: its amount (lowered, the share used
// rises and the fleet's max by no longer takes this node's old amount),
// and a period that now starts later, which the store begins afresh.
func TestBudgetGaugeFollowsAReload(t *testing.T) {
	r := newGaugeRig(t, `  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.01, period: month}
`)
	for range 3 {
		r.call("alice", 1000, 2000, 150) // 240 µUSD each
	}
	steps := []struct {
		name   string
		limits string
		used   float64 // USD
		limit  float64 // USD
		end    time.Time
	}{
		{"as started", "", 720e-6, 0.01, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"quota lowered to $0.001", `  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.001, period: month}
`, 720e-6, 0.001, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"quota raised to $0.1", `  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.1, period: month}
`, 720e-6, 0.1, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"period made a day: it starts afresh", `  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.1, period: day}
`, 0, 0.1, time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)},
	}
	for i, s := range steps {
		if s.limits != "" {
			r.reload(s.limits)
		}
		for _, c := range []struct {
			family string
			want   float64
		}{
			{"llmguard_quota_used", s.used},
			{"llmguard_quota_limit", s.limit},
			{"llmguard_limit_utilization", s.used / s.limit},
			{"llmguard_quota_period_end_timestamp_seconds", float64(s.end.Unix())},
		} {
			if got := r.gauge(c.family, "acme-usd"); !near(got, c.want) {
				t.Errorf("step %d (%s): %s = %v, want %v", i, s.name, c.family, got, c.want)
			}
		}
	}
	r.call("bob", 1000, 2000, 150) // the day's first spend
	if got := r.gauge("llmguard_quota_used", "acme-usd"); !near(got, 240e-6) {
		t.Errorf("after a request under the daily quota: quota_used %v, want 0.00024", got)
	}
}
