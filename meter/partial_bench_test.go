package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// BenchmarkAdmitSettle admits and settles a request under two rules, on
// the memory store (its TakeInto path) and on a store without TakeInto
// (the path of a remote store, which now passes bucket.WithPartial's
// context): per-rule failure handling must add no allocation to either.
func BenchmarkAdmitSettle(b *testing.B) {
	for _, c := range []struct {
		name  string
		plain bool
	}{{"memory", false}, {"store", true}} {
		b.Run(c.name, func(b *testing.B) {
			tl := newTimeline(&testing.T{}, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1000000000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 1000000000, per: 1m, on_failure: closed}
`)
			if c.plain {
				tl.meter.opt.Store, tl.meter.statuses = tl.store, nil
			}
			r := Request{ID: "bench", Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions",
				Model: "gpt-4o-mini", Weighed: true, Estimate: spec.Usage{InputTokens: 100, OutputTokens: 400}}
			s := Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200}
			b.ReportAllocs()
			for b.Loop() {
				x := tl.meter.Admit(r)
				if x.Verdict() != Admitted {
					b.Fatal(x.Verdict())
				}
				x.Settle(s)
			}
		})
	}
}
