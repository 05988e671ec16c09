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
	Input        int64 // uncached input tokens
	CachedInput  int64 // input tokens read from the prompt cache
	CacheWrite   int64 // input tokens written to the prompt cache (5-minute TTL)
	CacheWrite1h int64 // input tokens written to the prompt cache with a 1-hour TTL
	Output       int64 // output tokens, reasoning included
}

// USDPerMTok is a model's list prices in USD per million tokens, as price
// lists give them. A zero CachedInput or CacheWrite means "same as Input";
// a zero CacheWrite1h means "same as CacheWrite".
type USDPerMTok struct {
	Input, CachedInput, CacheWrite, CacheWrite1h, Output float64
}

// Price converts list prices to a Price, rounded to the nearest pico-USD
// per token (six decimals of USD per million tokens).
func (p USDPerMTok) Price() Price {
	if p.CachedInput == 0 {
		p.CachedInput = p.Input
	}
	if p.CacheWrite == 0 {
		p.CacheWrite = p.Input
	}
	if p.CacheWrite1h == 0 {
		p.CacheWrite1h = p.CacheWrite
	}
	pico := func(usdPerMTok float64) int64 { return int64(math.Round(usdPerMTok * 1e6)) }
	return Price{Input: pico(p.Input), CachedInput: pico(p.CachedInput), CacheWrite: pico(p.CacheWrite),
		CacheWrite1h: pico(p.CacheWrite1h), Output: pico(p.Output)}
}

// PriceFromUSDPerMTok is USDPerMTok{Input: input, CachedInput: cachedInput,
// Output: output}.Price().
func PriceFromUSDPerMTok(input, cachedInput, output float64) Price {
	return USDPerMTok{Input: input, CachedInput: cachedInput, Output: output}.Price()
}

// Tokens is a request's token counts. Input includes CachedInput and
// CacheWrite (OpenAI's prompt_tokens semantics; Anthropic's input_tokens
// plus both cache fields); CacheWrite includes CacheWrite1h; Output
// includes reasoning tokens.
type Tokens struct {
	Input        int64
	CachedInput  int64
	CacheWrite   int64
	CacheWrite1h int64
	Output       int64
}

// MicroUSD is the cost of t at price p in micro-USD, rounded up to a whole
// micro-dollar: Σ tokens × pico-USD per token / 10^6. Negative counts are
// treated as zero.
func (p Price) MicroUSD(t Tokens) int64 {
	in := clamp0(t.Input)
	cached := min(clamp0(t.CachedInput), in)
	write := min(clamp0(t.CacheWrite), in-cached)
	write1h := min(clamp0(t.CacheWrite1h), write)
	uncached := in - cached - write
	var hi, lo uint64
	add := func(n, price int64) {
		h, l := bits.Mul64(uint64(n), uint64(clamp0(price)))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	add(uncached, p.Input)
	add(cached, p.CachedInput)
	add(write-write1h, p.CacheWrite)
	add(write1h, p.CacheWrite1h)
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
