package meter

import (
	"strconv"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// BenchmarkSettleQuotas admits and settles one request of alice under a
// token bucket, a tenant-scoped and a user-scoped daily quota: what the
// budget gauges add to a settlement (their level kept) against what the
// request costs otherwise.
func BenchmarkSettleQuotas(b *testing.B) {
	r := newGaugeRig(b, `  - {name: tpm, scope: user, unit: tokens, rate: 1000000000, per: 1m}
  - {name: acme-daily-usd, scope: tenant, unit: usd, quota: 1000000, period: day}
  - {name: user-daily-tokens, scope: user, unit: tokens, quota: 1000000000, period: day}
`)
	alice := r.callers["alice"]
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		x := r.meter.Admit(Request{ID: "b" + strconv.Itoa(i), Principal: alice, Policy: r.policy,
			Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
			Estimate: spec.Usage{InputTokens: 10, OutputTokens: 20}})
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 10, OutputTokens: 15}, Status: 200})
	}
}
