package policy

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// textCostCase checks that MicroUSD, which takes its own path for a usage
// without audio, cache writes or web searches, prices u as the general
// microUSD does.
func textCostCase(t *testing.T, p Price, u spec.Usage) {
	t.Helper()
	if got, want := p.MicroUSD(u), p.microUSD(u); got != want {
		t.Fatalf("price %+v, usage %+v: MicroUSD %d, microUSD %d", p, u, got, want)
	}
}

// TestTextMicroUSDSameAsGeneral runs MicroUSD's text path against the
// general one over the boundaries (negatives, cached above the input, the
// long-context band, saturation) and random figures, with the fields the
// text path skips both zero and set (then the general path is taken).
func TestTextMicroUSDSameAsGeneral(t *testing.T) {
	prices := []Price{
		{},
		{Input: 2_500_000, CachedInput: 1_250_000, Output: 10_000_000},
		{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000,
			LongAbove: 200_000, Long: Rates{Input: 6_000_000, CachedInput: 600_000, CacheWrite: 7_500_000, Output: 22_500_000}},
		{Input: -5, CachedInput: math.MaxInt64, Output: math.MaxInt64},
		{Input: math.MaxInt64, CachedInput: math.MaxInt64, Output: math.MaxInt64, AudioInput: 40_000_000},
	}
	counts := []int64{math.MinInt64, -1, 0, 1, 2, 999_999, 1_000_000, 200_000, 200_001, 1 << 40, math.MaxInt64}
	for _, p := range prices {
		for _, in := range counts {
			for _, cached := range counts {
				for _, out := range counts {
					textCostCase(t, p, spec.Usage{InputTokens: in, CachedInputTokens: cached, OutputTokens: out})
					textCostCase(t, p, spec.Usage{InputTokens: in, CachedInputTokens: cached, OutputTokens: out, CacheWrite1hTokens: in})
					textCostCase(t, p, spec.Usage{InputTokens: in, CachedInputTokens: cached, OutputTokens: out, WebSearches: 2})
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		p := prices[r.IntN(len(prices))]
		u := spec.Usage{InputTokens: r.Int64N(1 << 22), CachedInputTokens: r.Int64N(1 << 22), OutputTokens: r.Int64N(1 << 20)}
		textCostCase(t, p, u)
	}
}

// FuzzTextMicroUSD compares MicroUSD with microUSD for any figures.
func FuzzTextMicroUSD(f *testing.F) {
	f.Add(int64(2_500_000), int64(1_250_000), int64(10_000_000), int64(0), int64(1000), int64(200), int64(100), int64(0), int64(0))
	f.Add(int64(3_000_000), int64(300_000), int64(15_000_000), int64(200_000), int64(300_000), int64(0), int64(5), int64(1), int64(0))
	f.Fuzz(func(t *testing.T, in, cachedIn, out, longAbove, inTok, cachedTok, outTok, write1h, searches int64) {
		p := Price{Input: in, CachedInput: cachedIn, Output: out, LongAbove: longAbove,
			Long: Rates{Input: in * 2, CachedInput: cachedIn * 2, Output: out * 3 / 2}}
		textCostCase(t, p, spec.Usage{InputTokens: inTok, CachedInputTokens: cachedTok, OutputTokens: outTok, CacheWrite1hTokens: write1h, WebSearches: searches})
	})
}

// TestUnitsOfSameAsUnits: UnitsOf, the meter's by-address form, costs a
// usage in every unit as Units's definition does: 1 a call for requests
// and concurrent, MicroUSD for usd, the unit's tokens otherwise.
func TestUnitsOfSameAsUnits(t *testing.T) {
	p := Price{Input: 3_000_000, CachedInput: 300_000, CacheWrite: 3_750_000, Output: 15_000_000, AudioInput: 40_000_000}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		u := spec.Usage{InputTokens: r.Int64N(1 << 20), CachedInputTokens: r.Int64N(1 << 19), OutputTokens: r.Int64N(1 << 16),
			ReasoningTokens: r.Int64N(1 << 10)}
		if r.IntN(4) == 0 {
			u.AudioInputTokens, u.CacheWriteTokens, u.WebSearches = r.Int64N(1<<10), r.Int64N(1<<10), r.Int64N(3)
		}
		for unit := spec.UnitRequests; unit <= spec.UnitConcurrent; unit++ {
			rule := Rule{Unit: unit}
			var want int64
			switch {
			case unit.PerCall():
				want = 1
			case unit == UnitUSD:
				want = p.microUSD(u)
			default:
				want = unit.Tokens(u)
			}
			if got := rule.UnitsOf(&u, &p); got != want {
				t.Fatalf("unit %v, usage %+v: UnitsOf %d, want %d", unit, u, got, want)
			}
			if got := rule.Units(u, p); got != want {
				t.Fatalf("unit %v, usage %+v: Units %d, want %d", unit, u, got, want)
			}
		}
	}
}
