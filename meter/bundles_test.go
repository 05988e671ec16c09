package meter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// bundleExchange is an admitted request of tenant under two limits (a
// token bucket and a USD quota), with estimate in tokens.
func bundleExchange(f spec.Flavor, model, tenant string, est spec.Usage) *Exchange {
	x := &Exchange{req: Request{Flavor: f, Principal: policy.Principal{Tenant: tenant}, Estimate: est}, modelLabel: model}
	end := time.Unix(1_900_000_000, 0)
	x.rules = []Applied{
		{Rule: &policy.Rule{Name: "user-tpm", Unit: policy.UnitTokens}, Key: "k1", Limit: bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Minute},
			Reserved: est.InputTokens + est.OutputTokens, Status: bucket.Status{Remaining: 1000 - est.InputTokens - est.OutputTokens}},
		{Rule: &policy.Rule{Name: "tenant-usd", Unit: policy.UnitUSD}, Key: "k2", Limit: bucket.Limit{Capacity: 5_000_000, Rate: 5_000_000, Per: time.Hour,
			WindowStart: end.Add(-time.Hour), WindowEnd: end}, Reserved: 300, Status: bucket.Status{Remaining: 4_000_000}},
	}
	return x
}

// TestBundledSeries: what a request records through its bundles (and
// RequestOf)
// (flowSeries, ruleSeries) lands in the series its flavor, model, tenant
// and limits name, requests of other tenants and models in theirs, and no
// series is created that no request recorded (no reasoning tokens, no
// charge, no estimate ratio without an estimate).
func TestBundledSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settle := func(x *Exchange, u spec.Usage, cost int64, deltas []bucket.Delta, owners []int) {
		m.admitted(x)
		m.settled(x, u, cost, true, deltas, owners)
		settled := make([]int64, len(x.rules)) // what Settle computes: the reservation and its delta
		for i, a := range x.rules {
			settled[i] = a.Reserved
		}
		for i, d := range deltas {
			settled[owners[i]] += d.Units
		}
		m.budgetSettled(x, settled)
	}
	for range 2 { // twice: the second through bundles already made
		a := bundleExchange(spec.FlavorOpenAI, "gpt-4o-mini", "acme", spec.Usage{InputTokens: 10, OutputTokens: 64})
		settle(a, spec.Usage{InputTokens: 9, OutputTokens: 20, CachedInputTokens: 4}, 250,
			[]bucket.Delta{{Key: "k1", Units: -45}, {Key: "k2", Units: -50}}, []int{0, 1})
	}
	c := bundleExchange(spec.FlavorOpenAI, "gpt-4o-mini", "initech", spec.Usage{InputTokens: 10, OutputTokens: 64})
	settle(c, spec.Usage{InputTokens: 9, OutputTokens: 20}, 7, nil, nil) // acme's flavor and model, another tenant
	b := bundleExchange(spec.FlavorAnthropic, "claude-x", "globex", spec.Usage{InputTokens: 0, OutputTokens: 100})
	settle(b, spec.Usage{InputTokens: 30, OutputTokens: 200}, 900, []bucket.Delta{{Key: "k1", Units: 130}}, []int{0})

	m.RequestOf(b, OutcomeAllowed, "")
	m.RequestOf(b, OutcomeUpstreamError, "")
	denied := bundleExchange(spec.FlavorOpenAI, "gpt-4o-mini", "acme", spec.Usage{InputTokens: 10, OutputTokens: 64})
	m.RequestOf(denied, OutcomeLimited, "user-tpm") // refused: no bundle
	for _, c := range []struct {
		name string
		got  prometheus.Collector
		want float64
	}{
		{"requests allowed anthropic", m.requests.WithLabelValues("anthropic", "claude-x", OutcomeAllowed, ""), 1},
		{"requests upstream_error anthropic", m.requests.WithLabelValues("anthropic", "claude-x", OutcomeUpstreamError, ""), 1},
		{"requests limited openai", m.requests.WithLabelValues("openai", "gpt-4o-mini", OutcomeLimited, "user-tpm"), 1},
		{"estimated openai input", m.tokensEstimated.WithLabelValues("openai", "gpt-4o-mini", "input"), 30},
		{"estimated openai output", m.tokensEstimated.WithLabelValues("openai", "gpt-4o-mini", "output"), 192},
		{"estimated anthropic output", m.tokensEstimated.WithLabelValues("anthropic", "claude-x", "output"), 100},
		{"tokens openai input", m.tokens.WithLabelValues("openai", "gpt-4o-mini", "input"), 27},
		{"tokens openai cached", m.tokens.WithLabelValues("openai", "gpt-4o-mini", "cached_input"), 8},
		{"tokens openai output", m.tokens.WithLabelValues("openai", "gpt-4o-mini", "output"), 60},
		{"tokens anthropic output", m.tokens.WithLabelValues("anthropic", "claude-x", "output"), 200},
		{"spend acme", m.spend.WithLabelValues("acme", "gpt-4o-mini"), 500e-6},
		{"spend globex", m.spend.WithLabelValues("globex", "claude-x"), 900e-6},
		{"spend initech", m.spend.WithLabelValues("initech", "gpt-4o-mini"), 7e-6},
		{"utilization initech", m.utilization.WithLabelValues("user-tpm", "initech"), 1 - 926.0/1000},
		{"reserved user-tpm", m.reserved.WithLabelValues("user-tpm"), 74*3 + 100},
		{"reserved tenant-usd", m.reserved.WithLabelValues("tenant-usd"), 1200},
		{"refunded user-tpm", m.refunded.WithLabelValues("user-tpm"), 90},
		{"refunded tenant-usd", m.refunded.WithLabelValues("tenant-usd"), 100},
		{"charged user-tpm", m.charged.WithLabelValues("user-tpm"), 130},
		{"utilization acme", m.utilization.WithLabelValues("user-tpm", "acme"), 1 - 926.0/1000},
		{"utilization globex", m.utilization.WithLabelValues("user-tpm", "globex"), 1 - 900.0/1000},
	} {
		if got := testutil.ToFloat64(c.got); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The token buckets' utilization is the share in use as written in
	// decimal, not 1 − remaining/capacity's float noise (0.07399999999999995
	// for 74 of 1000, 0.09999999999999998 for 100 of 1000).
	for tenant, want := range map[string]float64{"initech": 0.074, "acme": 0.074, "globex": 0.1} {
		if got := testutil.ToFloat64(m.utilization.WithLabelValues("user-tpm", tenant)); got != want {
			t.Errorf("utilization %s: %v, want exactly %v", tenant, got, want)
		}
	}
	// The quota gauges: settled spend (acme's 300 µUSD reservation settled
	// at 250), not the level at admission.
	for _, c := range []struct {
		name, family, tenant string
		want                 float64
	}{
		{"quota used acme", "llmguard_quota_used", "acme", 0.99995},
		{"quota used globex", "llmguard_quota_used", "globex", 1},
		{"quota limit globex", "llmguard_quota_limit", "globex", 5},
		{"quota end globex", "llmguard_quota_period_end_timestamp_seconds", "globex", 1_900_000_000},
		{"quota utilization acme", "llmguard_limit_utilization", "acme", 999_950.0 / 5_000_000},
	} {
		got, ok := gaugeValue(t, reg, c.family, map[string]string{"limit": "tenant-usd", "tenant": c.tenant})
		if !ok || got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s: %v (found %v), want %v", c.name, got, ok, c.want)
		}
	}
	// Only the series recorded: no reasoning, cache_write or anthropic
	// input tokens, no estimated anthropic input, no charge of tenant-usd.
	for _, c := range []struct {
		name string
		vec  prometheus.Collector
		want int
	}{
		{"tokens_estimated_total", m.tokensEstimated, 3},
		{"requests_total", m.requests, 3},
		{"tokens_total", m.tokens, 5},
		{"estimate_ratio", m.estimateRatio, 1}, // none for globex: no input estimated
		{"charged_units_total", m.charged, 1},
		{"refunded_units_total", m.refunded, 2},
		{"limit_utilization", m.budget, 6}, // 3 token buckets and 3 quotas
	} {
		if got := testutil.CollectAndCount(c.vec, "llmguard_"+c.name); got != c.want {
			t.Errorf("%s: %d series, want %d", c.name, got, c.want)
		}
	}
}

// TestBundlesAllocateNothing: a request whose flavor, model, tenant and
// limits were seen before records its metrics without allocating.
func TestBundlesAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations differ under -race")
	}
	m, err := NewMetrics(prometheus.NewRegistry(), MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deltas, owners := []bucket.Delta{{Key: "k1", Units: -45}, {Key: "k2", Units: 5}}, []int{0, 1}
	x := bundleExchange(spec.FlavorOpenAI, "gpt-4o-mini", "acme", spec.Usage{InputTokens: 10, OutputTokens: 64})
	m.admitted(x)
	m.settled(x, spec.Usage{InputTokens: 9, OutputTokens: 20}, 250, true, deltas, owners)
	rules := x.rules
	allocs := testing.AllocsPerRun(100, func() {
		y := Exchange{req: x.req, modelLabel: x.modelLabel, rules: rules}
		for i := range rules {
			rules[i].series = nil
		}
		m.admitted(&y)
		m.settled(&y, spec.Usage{InputTokens: 9, OutputTokens: 20}, 250, true, deltas, owners)
		m.RequestOf(&y, OutcomeAllowed, "")
	})
	if allocs != 0 {
		t.Errorf("%v allocations a request, want 0", allocs)
	}
}

// TestUpstreamSeriesAsUpstream: an upstream's answers recorded through its
// UpstreamSeries are exported exactly as Metrics.Upstream exports them
// (statuses, unreachable, classes outside 1xx–5xx, statuses outside the
// table), and a nil UpstreamSeries records nothing.
func TestUpstreamSeriesAsUpstream(t *testing.T) {
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, err := NewMetrics(regA, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(regB, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mock, other := a.UpstreamSeries("mock"), a.UpstreamSeries("other")
	for i, st := range []int{200, 200, 0, 503, 429, 99, 700, 201, 200, 0} {
		d := time.Duration(i+1) * 3 * time.Millisecond
		mock.Record(st, d)
		b.Upstream("mock", st, d)
		if i%3 == 0 {
			other.Record(st, 2*d)
			b.Upstream("other", st, 2*d)
		}
	}
	(*UpstreamSeries)(nil).Record(200, time.Second)
	fams := func(reg *prometheus.Registry) string {
		got, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var s strings.Builder
		for _, f := range got {
			if strings.HasPrefix(f.GetName(), "llmguard_upstream_") {
				for _, m := range f.GetMetric() { // when made differs; what is counted must not
					if c := m.GetCounter(); c != nil {
						c.CreatedTimestamp = nil
					}
					if h := m.GetHistogram(); h != nil {
						h.CreatedTimestamp = nil
					}
				}
				s.WriteString(f.String())
				s.WriteByte('\n')
			}
		}
		return s.String()
	}
	if got, want := fams(regA), fams(regB); got != want || !strings.Contains(got, `value:"700"`) {
		t.Errorf("through UpstreamSeries:\n%s\nthrough Upstream:\n%s", got, want)
	}
}
