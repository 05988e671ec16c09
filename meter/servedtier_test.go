package meter

import (
	"testing"

	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// An answer is settled at the dearer of the tier its request was admitted
// in and the tier it says it was served at: a request without a tier that
// its project served at priority pays priority prices; an answer naming a
// cheaper tier (or none) never lowers the charge below the request's own
// tier; an unknown tier is priority's; a dearer tier without prices keeps
// the request's. Each step's cost is computed from the price table.
func TestTimelineSettledAtTheServedTier(t *testing.T) {
	tl := newTimeline(t, `  - {name: dollars, scope: tenant, unit: usd, quota: 1000, period: month}
`)
	used := spec.Usage{InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 3000}
	price := func(model, tier string) int64 { return tl.policy.Quote(model, tier).Price.MicroUSD(used) }
	if price("gpt-5", "priority") <= price("gpt-5", "default") || price("gpt-5", "default") <= price("gpt-5", "flex") {
		t.Fatalf("gpt-5's tiers are not priced priority > default > flex: %d, %d, %d",
			price("gpt-5", "priority"), price("gpt-5", "default"), price("gpt-5", "flex"))
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
}
