package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// admitSearch asks for a gpt-4o-mini chat reserving in input and out
// output tokens and the search fees of search (its SearchContext and
// SearchResults).
func (tl *timeline) admitSearch(in, out int64, search spec.Usage) *Exchange {
	tl.n++
	return tl.meter.Admit(Request{ID: "req-s" + string(rune('a'+tl.n)), Principal: tl.alice, Policy: tl.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out, SearchContext: search.SearchContext, SearchResults: search.SearchResults}})
}

// A dollar budget that holds 47 calls priced at their tokens (100,000 in,
// 10,000 out at gpt-4o-mini's $0.15 / $0.60: 21,000 µUSD each) holds 17
// when each also carries a search fee at the default medium size ($35 per
// 1,000: 56,000 µUSD each), 14 at high ($50: 71,000), and 24 with
// OpenRouter's 5 web results ($0.02: 41,000): in-flight calls near the
// budget can spend at most what it holds, never in-flight × fee past it.
func TestSearchFeeReservedAgainstABudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		search spec.Usage
		want   int
	}{
		{"tokens only", spec.Usage{}, 47},
		{"medium search fee", spec.Usage{SearchContext: spec.SearchContextMedium}, 17},
		{"high search fee", spec.Usage{SearchContext: spec.SearchContextHigh}, 14},
		{"openrouter web results", spec.Usage{SearchResults: 5}, 24},
	} {
		tl := newTimeline(t, `  - {name: dollars, scope: user, unit: usd, rate: 1, per: 24h}
`)
		admitted := 0
		for range 1000 { // none settled: all in flight
			if tl.admitSearch(100_000, 10_000, tc.search).Verdict() != Admitted {
				break
			}
			admitted++
		}
		if admitted != tc.want {
			t.Errorf("%s: %d calls admitted by $1, want %d", tc.name, admitted, tc.want)
		}
		if spent := 1_000_000 - tl.level(tl.mem, "dollars"); spent > 1_000_000 {
			t.Errorf("%s: %d µUSD reserved, past the $1 budget", tc.name, spent)
		}
	}
}

// Settlement charges the size the usage reports, refunding the difference
// when it is smaller than the size reserved (Perplexity reports the size
// it billed), and the reserved size when the usage names none (OpenAI's
// search models report no search); OpenRouter's web results, which no
// usage counts, are charged as reserved; an upstream error without usage
// refunds every fee. The ledger record carries the fee's size, the results
// and the search fees' part of the cost.
func TestSearchFeeReconciled(t *testing.T) {
	const tokens = 150 + 60 // 1,000 in, 100 out at gpt-4o-mini's prices, µUSD
	for _, tc := range []struct {
		name     string
		reserved spec.Usage
		reported spec.Usage
		source   spec.Source
		charged  int64 // µUSD
		fee      int64 // the ledger's search_fee_micro_usd
		size     string
		results  int64
	}{
		{"reports a smaller size: refunds the difference", spec.Usage{SearchContext: spec.SearchContextHigh},
			spec.Usage{InputTokens: 1000, OutputTokens: 100, SearchContext: spec.SearchContextLow}, spec.SourceReported, tokens + 30_000, 30_000, "low", 0},
		{"reports a larger size: charged it", spec.Usage{SearchContext: spec.SearchContextLow},
			spec.Usage{InputTokens: 1000, OutputTokens: 100, SearchContext: spec.SearchContextHigh}, spec.SourceReported, tokens + 50_000, 50_000, "high", 0},
		{"reports none: the size reserved", spec.Usage{SearchContext: spec.SearchContextMedium},
			spec.Usage{InputTokens: 1000, OutputTokens: 100}, spec.SourceReported, tokens + 35_000, 35_000, "medium", 0},
		{"counted locally: the size reserved", spec.Usage{SearchContext: spec.SearchContextMedium},
			spec.Usage{InputTokens: 1000, OutputTokens: 100}, spec.SourceCounted, tokens + 35_000, 35_000, "medium", 0},
		{"web results charged as reserved", spec.Usage{SearchResults: 3},
			spec.Usage{InputTokens: 1000, OutputTokens: 100}, spec.SourceReported, tokens + 12_000, 12_000, "", 3},
		{"nothing reported: the reservation stands", spec.Usage{SearchContext: spec.SearchContextLow, SearchResults: 5},
			spec.Usage{}, spec.SourceReserved, tokens + 30_000 + 20_000, 50_000, "low", 5},
		{"upstream error: every fee refunded", spec.Usage{SearchContext: spec.SearchContextHigh, SearchResults: 5},
			spec.Usage{}, spec.SourceRefund, 0, 0, "", 0},
	} {
		tl := newTimeline(t, `  - {name: dollars, scope: user, unit: usd, rate: 1, per: 24h}
`)
		x := tl.admitSearch(1000, 100, tc.reserved)
		if x.Verdict() != Admitted {
			t.Fatalf("%s: verdict %v", tc.name, x.Verdict())
		}
		x.Settle(Settlement{Source: tc.source, Usage: tc.reported, Status: 200})
		if spent := 1_000_000 - tl.level(tl.mem, "dollars"); spent != tc.charged {
			t.Errorf("%s: %d µUSD charged, want %d", tc.name, spent, tc.charged)
		}
		recs := tl.ledger.all()
		if len(recs) != 1 {
			t.Fatalf("%s: ledger %+v, want one record", tc.name, recs)
		}
		r := recs[0]
		if r.CostMicroUSD != tc.charged || r.SearchFeeMicroUSD != tc.fee || r.SearchContextSize != tc.size || r.SearchResults != tc.results {
			t.Errorf("%s: record cost %d, search fee %d, size %q, %d results; want %d, %d, %q, %d", tc.name,
				r.CostMicroUSD, r.SearchFeeMicroUSD, r.SearchContextSize, r.SearchResults, tc.charged, tc.fee, tc.size, tc.results)
		}
	}
}
