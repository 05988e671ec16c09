package meter

import (
	"testing"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/spec"
)

// BenchmarkAdmitSettle admits and settles a request under two rules, on
// the memory store (its TakeInto path) and on a store without TakeInto
// (the path of a remote store, which now passes bucket.WithPartial's
// context): per-rule failure handling must add no allocation to either.
// The quota cases add a day quota, without and with a bucket.Fallback told
// each take's shared levels (ObserveLevels): remembering them must add no
// allocation either, once the key is known.
func BenchmarkAdmitSettle(b *testing.B) {
	for _, c := range []struct {
		name     string
		plain    bool
		quota    bool
		observed bool
	}{{"memory", false, false, false}, {"store", true, false, false},
		{"quota", false, true, false}, {"quota-observed", false, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			limits := `  - {name: tpm, scope: tenant, unit: tokens, rate: 1000000000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 1000000000, per: 1m, on_failure: closed}
`
			if c.quota {
				limits += "  - {name: day, scope: tenant, unit: tokens, quota: 1000000000000, period: day, on_failure: open}\n"
			}
			tl := newTimeline(&testing.T{}, limits)
			if c.plain {
				tl.meter.opt.Store, tl.meter.statuses = tl.store, nil
			}
			if c.observed {
				fb := bucket.NewFallback(bucket.FallbackOptions{Nodes: 3, Memory: bucket.MemoryOptions{SweepEvery: -1}})
				defer fb.Close()
				tl.meter.opt.Fallback, tl.meter.levels = fb, fb
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
