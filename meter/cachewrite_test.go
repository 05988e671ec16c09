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

// The ledger record holds every priced part of its cost: the 1-hour cache
// writes, the audio tokens and the web searches as well as the token
// counts, so that finance can recompute cost_micro_usd from the record
// and the price table (trial3: a Messages call with 500 of its 2,000
// cache-write tokens at the 1-hour price cost 13,446 µUSD, and the record,
// without the split, read as 12,321).
func TestLedgerRecordsEveryPricedPart(t *testing.T) {
	tl := newTimeline(t, `  - {name: dollars, scope: tenant, unit: usd, rate: 100, per: 1h}
`)
	x := tl.meter.Admit(Request{ID: "req-parts", Principal: tl.alice, Policy: tl.policy,
		Flavor: spec.FlavorAnthropic, Path: "/v1/messages", Model: "claude-sonnet-4-5", Weighed: true,
		Estimate: spec.Usage{InputTokens: 5000, OutputTokens: 200}})
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v, want admitted", x.Verdict())
	}
	used := spec.Usage{InputTokens: 4007, CachedInputTokens: 1000, CacheWriteTokens: 2000, CacheWrite1hTokens: 500,
		OutputTokens: 100, AudioInputTokens: 7, AudioOutputTokens: 9, WebSearches: 3}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: used, Status: 200})
	recs := tl.ledger.all()
	if len(recs) != 1 {
		t.Fatalf("ledger %+v, want one record", recs)
	}
	r := recs[0]
	if r.CacheWriteTokens != 2000 || r.CacheWrite1hTokens != 500 || r.AudioInputTokens != 7 || r.AudioOutputTokens != 9 || r.WebSearches != 3 {
		t.Errorf("record %+v: want cache writes 2000 (500 of them 1-hour), audio 7 in and 9 out, 3 web searches", r)
	}
}
