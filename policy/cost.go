package policy

import (
	"math"
	"math/bits"
)

// Price is a model's price list in pico-USD per token. A price list's
// "USD per million tokens" is micro-USD per token, so pico-USD per token is
// that figure times 10^6: $0.15 per million tokens is 150,000 pico-USD per
// token. Integers keep every sum exact.
type Price struct {
	Input       int64 // uncached input tokens
	CachedInput int64 // cached input tokens
	Output      int64 // output tokens, reasoning included
}

// PriceFromUSDPerMTok converts list prices in USD per million tokens to a
// Price. A zero cached price means "same as input". Prices are rounded to
// the nearest pico-USD per token (six decimals of USD per million tokens).
func PriceFromUSDPerMTok(input, cachedInput, output float64) Price {
	if cachedInput == 0 {
		cachedInput = input
	}
	return Price{
		Input:       int64(math.Round(input * 1e6)),
		CachedInput: int64(math.Round(cachedInput * 1e6)),
		Output:      int64(math.Round(output * 1e6)),
	}
}

// Tokens is a request's token counts. Input includes CachedInput (OpenAI's
// prompt_tokens semantics); Output includes reasoning tokens.
type Tokens struct {
	Input       int64
	CachedInput int64
	Output      int64
}

// MicroUSD is the cost of t at price p in micro-USD, rounded up to a whole
// micro-dollar: Σ tokens × pico-USD per token / 10^6. Negative counts are
// treated as zero.
func (p Price) MicroUSD(t Tokens) int64 {
	cached := clamp0(min(t.CachedInput, t.Input))
	uncached := clamp0(t.Input) - cached
	var hi, lo uint64
	add := func(n, price int64) {
		h, l := bits.Mul64(uint64(n), uint64(clamp0(price)))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	add(uncached, p.Input)
	add(cached, p.CachedInput)
	add(clamp0(t.Output), p.Output)
	if hi >= 1e6 { // quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 1e6)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func clamp0(n int64) int64 { return max(n, 0) }

// Units is the cost of t in the rule's unit: 1 for requests, token counts
// for token units, micro-USD at price for usd.
func (r *Rule) Units(t Tokens, price Price) int64 {
	switch r.Unit {
	case UnitRequests:
		return 1
	case UnitTokens:
		return clamp0(t.Input) + clamp0(t.Output)
	case UnitInputTokens:
		return clamp0(t.Input)
	case UnitOutputTokens:
		return clamp0(t.Output)
	default:
		return price.MicroUSD(t)
	}
}
