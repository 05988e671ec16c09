package meter

import (
	"context"
	"testing"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/spec"
)

// admitModel asks for a chat of model in service tier tier, reserving in
// input and out output tokens.
func (tl *timeline) admitModel(model, tier string, in, out int64) *Exchange {
	tl.n++
	return tl.meter.Admit(Request{ID: "req-m" + string(rune('a'+tl.n)), Principal: tl.alice, Policy: tl.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: model, ServiceTier: tier, Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
}

// levelKey is what the bucket at key holds now, for rule.
func (tl *timeline) levelKey(rule, key string) int64 {
	tl.t.Helper()
	for i := range tl.policy.Rules() {
		r := &tl.policy.Rules()[i]
		if r.Name == rule {
			d, err := tl.mem.Take(context.Background(), "", []bucket.Item{{Key: key, Limit: r.LimitAt(tl.clock.Now())}})
			if err != nil {
				tl.t.Fatal(err)
			}
			return d.Buckets[0].Remaining
		}
	}
	tl.t.Fatalf("no rule %q", rule)
	return 0
}

// Under a usd limit a model without a price is refused before any take;
// under a token limit it passes, and so does a request that is not weighed.
func TestTimelineUnpricedModel(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 10000, per: 1m}
  - {name: dollars, scope: tenant, unit: usd, rate: 1, per: 1h, models: ["gpt-*", "mystery-*"]}
`)
	x := tl.admitModel("mystery-model", "", 100, 100)
	if x.Verdict() != Unpriced || x.UnpricedBy() == nil || x.UnpricedBy().Name != "dollars" ||
		x.Quote().Missing != `models."mystery-model"` || x.Outcome(0) != OutcomeInvalid {
		t.Fatalf("verdict %v by %v, quote %+v, want unpriced by dollars", x.Verdict(), x.UnpricedBy(), x.Quote())
	}
	if x.Settle(Settlement{Source: spec.SourceReserved}) {
		t.Fatal("a refused exchange was settled")
	}
	if got := tl.level(tl.mem, "tpm"); got != 10000 {
		t.Fatalf("tpm holds %d after a refusal, want 10000: nothing taken", got)
	}
	// gpt-5-pro is no snapshot of gpt-5: priced as itself ($15/$120).
	x = tl.admitModel("gpt-5-pro", "", 1000, 1000)
	if x.Verdict() != Admitted || x.ModelLabel() != "gpt-5-pro" || x.Rules()[1].Reserved != 15_000+120_000 {
		t.Fatalf("gpt-5-pro: %v, label %q, reserved %d µUSD, want 135000", x.Verdict(), x.ModelLabel(), x.Rules()[1].Reserved)
	}
	// A priority request for a model without priority prices is unpriced.
	if x := tl.admitModel("gpt-5-pro", "priority", 10, 10); x.Verdict() != Unpriced || x.Quote().Missing != `models."gpt-5-pro".priority` {
		t.Fatalf("priority gpt-5-pro: %v (%+v), want unpriced", x.Verdict(), x.Quote())
	}
	// Priority is priced at its own rates: gpt-5 $2.50/$20.
	if x := tl.admitModel("gpt-5", "priority", 1000, 1000); x.Verdict() != Admitted || x.Rules()[1].Reserved != 2_500+20_000 {
		t.Fatalf("priority gpt-5: %v, reserved %d µUSD, want 22500", x.Verdict(), x.Rules()[1].Reserved)
	}
	// No usd rule applies to an unpriced model outside its globs.
	if x := tl.admitModel("llama-3", "", 100, 100); x.Verdict() != Admitted || x.ModelLabel() != "other" {
		t.Fatalf("llama-3 under tokens only: %v (%q), want admitted as other", x.Verdict(), x.ModelLabel())
	}
	// A request that is not weighed costs no dollars: it passes.
	x = tl.meter.Admit(Request{ID: "unweighed", Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI,
		Path: "/v1/models", Model: "mystery-model"})
	if x.Verdict() != Admitted {
		t.Fatalf("unweighed request: %v, want admitted", x.Verdict())
	}
}

// per_model keeps a bucket per priced model: spending gpt-4o-mini's leaves
// gpt-4o's whole, a dated snapshot shares its model's bucket, and every
// unpriced model shares one. Without it one bucket serves every model.
func TestTimelinePerModelBuckets(t *testing.T) {
	tl := newTimeline(t, `  - {name: per, scope: user, unit: tokens, rate: 1000, per: 1h, models: ["*"], per_model: true}
  - {name: shared, scope: user, unit: tokens, rate: 5000, per: 1h, models: ["*"]}
`)
	key := func(label string) string {
		for i := range tl.policy.Rules() {
			if r := &tl.policy.Rules()[i]; r.Name == "per" {
				return r.ModelKey(tl.alice, label)
			}
		}
		return ""
	}
	for _, step := range []struct {
		name   string
		model  string
		in     int64
		admit  bool
		bucket string // label of the per-model bucket it takes from
	}{
		{"mini spends 900", "gpt-4o-mini", 900, true, "gpt-4o-mini"},
		{"mini's snapshot shares mini's bucket", "gpt-4o-mini-2024-07-18", 200, false, "gpt-4o-mini"},
		{"gpt-4o has its own", "gpt-4o", 900, true, "gpt-4o"},
		{"a slashed name matches * and is unpriced", "openai/gpt-4o", 900, true, ""},
		{"every unpriced name shares one bucket", "made-up-1", 200, false, ""},
	} {
		x := tl.admitModel(step.model, "", step.in, 0)
		if got := x.Verdict() == Admitted; got != step.admit {
			t.Fatalf("%s: %v, want admitted %v", step.name, x.Verdict(), step.admit)
		}
		if x.Rules()[0].Key != key(step.bucket) {
			t.Fatalf("%s: took from %q, want %q", step.name, x.Rules()[0].Key, key(step.bucket))
		}
	}
	if got := tl.levelKey("per", key("gpt-4o-mini")); got != 100 {
		t.Errorf("gpt-4o-mini's bucket holds %d, want 100", got)
	}
	if got := tl.levelKey("per", key("gpt-4o")); got != 100 {
		t.Errorf("gpt-4o's bucket holds %d, want 100", got)
	}
	if got := tl.level(tl.mem, "shared"); got != 5000-2700 {
		t.Errorf("the shared bucket holds %d, want %d: every model's spend", got, 5000-2700)
	}
}
