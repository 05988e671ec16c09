package meter

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// An answer is settled at the dearer of the tier its request was admitted
// in and the tier it says it was served at: a request without a tier that
// its project served at priority pays priority prices; an answer naming a
// cheaper tier (or none) never lowers the charge below the request's own
// tier; an unknown tier is priority's; a dearer tier without prices is
// charged at the dearest tier priced (the standard tier's, for a flex
// request: it was charged flex's, the cheapest, before tier33) and counted
// in served_tier_unpriced_total. Each step's cost is computed from the
// price table.
func TestTimelineSettledAtTheServedTier(t *testing.T) {
	// flex-only: flex prices, no priority prices.
	tl := newTimelineModels(t, "  flex-only: {input_usd_per_mtok: 2, output_usd_per_mtok: 8, flex: {input_usd_per_mtok: 1, output_usd_per_mtok: 4}}\n",
		`  - {name: dollars, scope: tenant, unit: usd, quota: 1000, period: month}
`)
	used := spec.Usage{InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 3000}
	price := func(model, tier string) int64 { return tl.policy.Quote(model, tier).Price.MicroUSD(used) }
	if price("gpt-5", "priority") <= price("gpt-5", "default") || price("gpt-5", "default") <= price("gpt-5", "flex") {
		t.Fatalf("gpt-5's tiers are not priced priority > default > flex: %d, %d, %d",
			price("gpt-5", "priority"), price("gpt-5", "default"), price("gpt-5", "flex"))
	}
	if price("flex-only", "default") <= price("flex-only", "flex") || tl.policy.Quote("flex-only", "priority").Priced {
		t.Fatalf("flex-only: want no priority prices and default dearer than flex")
	}
	for i, step := range []struct {
		name         string
		model, asked string
		served       string
		charged      string // the tier whose price is charged
		tier         policy.ServiceTier
	}{
		{"no tier, served at priority", "gpt-5", "", "priority", "priority", policy.TierPriority},
		{"auto, served at priority", "gpt-5", "auto", "priority", "priority", policy.TierPriority},
		{"no tier, served at default", "gpt-5", "", "default", "default", policy.TierStandard},
		{"no tier, served at scale", "gpt-5", "", "scale", "default", policy.TierStandard},
		{"no tier, names none", "gpt-5", "", "", "default", policy.TierStandard},
		{"priority, answer says default", "gpt-5", "priority", "default", "priority", policy.TierPriority},
		{"priority, answer says flex", "gpt-5", "priority", "flex", "priority", policy.TierPriority},
		{"priority, answer names none", "gpt-5", "priority", "", "priority", policy.TierPriority},
		{"flex, served at default", "gpt-5", "flex", "default", "default", policy.TierStandard},
		{"no tier, answer says flex", "gpt-5", "", "flex", "default", policy.TierStandard},
		{"no tier, unreadable tier", "gpt-5", "", spec.TierUnread, "priority", policy.TierPriority},
		{"no tier, unknown tier", "gpt-5", "", "Priority ", "priority", policy.TierPriority},
		{"no priority prices: the tier asked", "gpt-5-pro", "", "priority", "default", policy.TierStandard},
		{"no priority prices, again (warned once)", "gpt-5-pro", "", "priority", "default", policy.TierStandard},
		{"flex, no priority prices: the dearest tier priced", "flex-only", "flex", "priority", "default", policy.TierStandard},
		{"flex, unreadable tier, no priority prices", "flex-only", "flex", spec.TierUnread, "default", policy.TierStandard},
		{"flex, served at flex", "flex-only", "flex", "flex", "flex", policy.TierFlex},
		{"Groq's on_demand is standard", "gpt-5", "", "on_demand", "default", policy.TierStandard},
	} {
		x := tl.admitModel(step.model, step.asked, 100, 100)
		if x.Verdict() != Admitted {
			t.Fatalf("step %d (%s): %v", i, step.name, x.Verdict())
		}
		before := tl.level(tl.mem, "dollars") + x.Rules()[0].Reserved
		u := used
		u.ServiceTier = step.served
		x.Settle(Settlement{Source: spec.SourceReported, Usage: u, Status: 200})
		want := price(step.model, step.charged)
		if got := before - tl.level(tl.mem, "dollars"); got != want {
			t.Errorf("step %d (%s): charged %d µUSD, want %d (%s prices)", i, step.name, got, want, step.charged)
		}
		recs := tl.ledger.all()
		if r := recs[len(recs)-1]; r.CostMicroUSD != want || r.ServiceTier != step.tier.String() {
			t.Errorf("step %d (%s): ledger cost %d µUSD at tier %q, want %d at %q", i, step.name, r.CostMicroUSD, r.ServiceTier, want, step.tier)
		}
		if x.Quote().Tier != step.tier {
			t.Errorf("step %d (%s): settled quote at %v, want %v", i, step.name, x.Quote().Tier, step.tier)
		}
	}
	// The answers served at priority without its prices, counted.
	m := tl.meter.Metrics().unpricedTier
	if a, b := testutil.ToFloat64(m.WithLabelValues("gpt-5-pro", "priority")), testutil.ToFloat64(m.WithLabelValues("flex-only", "priority")); a != 2 || b != 2 {
		t.Errorf("served_tier_unpriced_total{tier=priority}: gpt-5-pro %v, flex-only %v, want 2 each", a, b)
	}
}
