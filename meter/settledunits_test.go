package meter

import (
	"testing"

	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// TestSettledUnitsPricedSameAsSettledUnits: given the price of the usage,
// as Settle works it out, settledUnitsPriced is settledUnits for every
// unit, source, known or not, weighed or not, billed per image or not.
func TestSettledUnitsPricedSameAsSettledUnits(t *testing.T) {
	price := policy.Price{Input: 150_000, CachedInput: 75_000, CacheWrite: 187_500, Output: 600_000, LongAbove: 200, Long: policy.Rates{Input: 300_000, Output: 900_000}}
	usages := []spec.Usage{{}, {InputTokens: 230, OutputTokens: 14}, {InputTokens: 199, CachedInputTokens: 64, OutputTokens: 1},
		{InputTokens: 1_000_000, OutputTokens: 5_000, WebSearches: 2}}
	units := []policy.Unit{policy.UnitRequests, policy.UnitTokens, policy.UnitInputTokens, policy.UnitOutputTokens, policy.UnitUSD, policy.UnitConcurrent}
	sources := []spec.Source{spec.SourceReported, spec.SourceCounted, spec.SourceReserved, spec.SourceRefund}
	n := 0
	for _, u := range units {
		rule := &policy.Rule{Name: "r", Unit: u}
		for _, weighed := range []bool{true, false} {
			for _, perImage := range []int64{0, 40_000} {
				x := &Exchange{req: Request{Weighed: weighed, PerImage: perImage, Images: 2}, quote: policy.Quote{Price: price}}
				for _, src := range sources {
					for _, known := range []bool{true, false} {
						for _, actual := range usages {
							a := &Applied{Rule: rule, Reserved: 777}
							want := x.settledUnits(a, src, known, actual)
							if got := x.settledUnitsPriced(a, src, known, actual, price.MicroUSD(actual)); got != want {
								t.Errorf("unit %v weighed %v per image %d source %v known %v usage %+v: %d, want %d",
									u, weighed, perImage, src, known, actual, got, want)
							}
							n++
						}
					}
				}
			}
		}
	}
	if n != 6*2*2*4*2*4 {
		t.Fatalf("%d cases", n)
	}
}
