package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// A request whose body asks for prompt-cache writes reserves its input at
// the write price it names: claude-opus-4-7 lists $5 input, $6.25 for a
// 5-minute write and $10 for a 1-hour write per million tokens, $25
// output. The adversarial tester's 1-hour body reserved 43,245 µUSD at the
// input price and was charged 72,024. Settlement with nothing reported
// charges the same figure; a model whose write price is the input price
// (gpt-4o-mini) reserves as before.
func TestTimelineCacheWriteReserved(t *testing.T) {
	tl := newTimeline(t, `  - {name: dollars, scope: tenant, unit: usd, rate: 100, per: 1h}
`)
	admit := func(model string, write, write1h int64) *Exchange {
		tl.n++
		return tl.meter.Admit(Request{ID: "req-c" + string(rune('a'+tl.n)), Principal: tl.alice, Policy: tl.policy,
			Flavor: spec.FlavorAnthropic, Path: "/v1/messages", Model: model, Weighed: true,
			Estimate: spec.Usage{InputTokens: 1000, OutputTokens: 100, CacheWriteTokens: write, CacheWrite1hTokens: write1h}})
	}
	for _, c := range []struct {
		name           string
		model          string
		write, write1h int64
		want           int64 // µUSD
	}{
		{"no caching", "claude-opus-4-7", 0, 0, 5_000 + 2_500},
		{"5-minute writes", "claude-opus-4-7", 1000, 0, 6_250 + 2_500},
		{"1-hour writes", "claude-opus-4-7", 1000, 1000, 10_000 + 2_500},
		{"write price is the input price", "gpt-4o-mini", 1000, 1000, 150 + 60},
	} {
		x := admit(c.model, c.write, c.write1h)
		if x.Verdict() != Admitted || x.Rules()[0].Reserved != c.want {
			t.Errorf("%s: %v, reserved %d µUSD, want %d", c.name, x.Verdict(), x.Rules()[0].Reserved, c.want)
		}
		x.Settle(Settlement{Source: spec.SourceReserved, Status: 200})
	}
}
