package config

import (
	"math"
	"testing"
)

// ParsePrices never panics, and every price it returns — text, cache,
// audio, each tier and band — is a finite, non-negative number.
func FuzzParsePrices(f *testing.F) {
	for _, s := range []string{
		`{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "input_cost_per_audio_token": 4e-05, "output_cost_per_audio_token": 8e-05}}`,
		`{"m": {"input_cost_per_token": 1e-06, "input_cost_per_token_above_200k_tokens_priority": 2e-06, "output_cost_per_audio_token": "x"}}`,
		`{"m": {"input_cost_per_token": -1}}`, `{"m": 1}`, `[]`, `{`, ``,
		`{"m": {"input_cost_per_token": 1e300, "output_cost_per_token": 1}}`, // finite per token, +Inf per million once scaled
		// finite per request, +Inf per 1,000 once scaled
		`{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "search_context_cost_per_query": {"search_context_size_high": 1e300}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParsePrices(b)
		if err != nil {
			return
		}
		bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
		check := func(name string, p TierPrices) {
			for _, v := range []float64{p.InputUSDPerMTok, p.CachedInputUSDPerMTok, p.CacheWriteUSDPerMTok, p.CacheWrite1hUSDPerMTok,
				p.OutputUSDPerMTok, p.AudioInputUSDPerMTok, p.AudioOutputUSDPerMTok} {
				if bad(v) {
					t.Fatalf("%s: price %v in %+v", name, v, p)
				}
			}
		}
		for name, m := range ms {
			check(name, m.Standard())
			for _, p := range []*TierPrices{m.Priority, m.Flex} {
				if p != nil {
					check(name, *p)
				}
			}
			if lc := m.LongContext; lc != nil {
				check(name, lc.TierPrices)
				if lc.AboveInputTokens <= 0 {
					t.Fatalf("%s: band above %d tokens", name, lc.AboveInputTokens)
				}
			}
			if fees := m.SearchRequestUSDPerK; bad(fees.Low) || bad(fees.Medium) || bad(fees.High) {
				t.Fatalf("%s: search fees %+v", name, fees)
			}
		}
	})
}
