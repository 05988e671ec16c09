package policy

import (
	"math"
	"math/bits"

	"github.com/llmguard/llmguard/spec"
)

// Price is a model's price list in pico-USD per token, in one service
// tier. A price list's "USD per million tokens" is micro-USD per token, so
// pico-USD per token is that figure times 10^6: $0.15 per million tokens
// is 150,000 pico-USD per token. Integers keep every sum exact. When
// LongAbove is set, a request whose input exceeds LongAbove tokens pays
// Long's rates on every token instead (a long-context band).
type Price struct {
	Input        int64 // uncached input tokens
	CachedInput  int64 // input tokens read from the prompt cache
	CacheWrite   int64 // input tokens written to the prompt cache (5-minute TTL)
	CacheWrite1h int64 // input tokens written to the prompt cache with a 1-hour TTL
	Output       int64 // output tokens, reasoning included
	// LongAbove is the long-context threshold in input tokens (cached and
	// cache writes included); 0: the model has no long-context band.
	LongAbove int64
	// Long are the rates of a request past LongAbove, pico-USD per token.
	Long Rates
	// AudioInput and AudioOutput price the audio part of input and output
	// (spec.Usage.AudioInputTokens, AudioOutputTokens), pico-USD per
	// token, in every band: gpt-4o-audio-preview lists $40 and $80 per
	// million audio tokens against $2.50 and $10 for text
	// (https://developers.openai.com/api/docs/models/gpt-4o-audio-preview).
	// 0: the model has no audio price; an audio token then costs no less
	// than a text token, and a request that asks for audio is not priced
	// (Quote.ForAudio).
	AudioInput, AudioOutput int64
	// SearchRequest is the per-request search fee of a model that bills
	// one (Perplexity's Sonar models), pico-USD per request by search
	// context size (spec.Usage.SearchContext). A size left at 0 costs
	// DefaultSearchRequestPicoUSD's fee at that size.
	SearchRequest SearchFees
}

// SearchFees are per-request search fees by search context size,
// pico-USD per request ($5 per 1,000 requests is 5,000,000,000). The zero
// value sets none (DefaultSearchRequestPicoUSD applies); SearchFeeWaived
// charges none.
type SearchFees struct {
	Low, Medium, High int64
}

// SearchFeeWaived is a SearchFees value that charges no fee at its size: a
// config's search_request_usd_per_k size written as 0
// (config.SearchFees.Waived), for a model that runs no search.
const SearchFeeWaived int64 = -1

// DefaultSearchRequestPicoUSD is the per-request search fee reserved and
// charged at a search context size (spec.Usage.SearchContext) when the
// model's price sets none at that size: the dearest search model's, OpenAI
// gpt-4o-search-preview's $30, $35 and $50 per 1,000 requests (its
// original search pricing, as LiteLLM's price table and OpenRouter's model
// page, $35 per 1,000 at the default medium size, give it), above
// Perplexity's dearest, its Pro Search's $14, $18 and $22
// (docs.perplexity.ai, pricing, request pricing; Sonar's are $5, $8 and
// $12) and gpt-4o-mini-search-preview's $25, $27.50 and $30. So a model
// whose fee the price table does not give is never charged below what any
// search model bills; set search_request_usd_per_k (or LiteLLM's
// search_context_cost_per_query) to charge its own.
var DefaultSearchRequestPicoUSD = SearchFees{Low: 30_000_000_000, Medium: 35_000_000_000, High: 50_000_000_000}

// of is the fee at size s, DefaultSearchRequestPicoUSD's where f sets
// none; 0 for SearchContextNone.
func (f SearchFees) of(s spec.SearchContextSize) int64 {
	var v, d int64
	switch s {
	case spec.SearchContextNone:
		return 0
	case spec.SearchContextLow:
		v, d = f.Low, DefaultSearchRequestPicoUSD.Low
	case spec.SearchContextMedium:
		v, d = f.Medium, DefaultSearchRequestPicoUSD.Medium
	default:
		v, d = f.High, DefaultSearchRequestPicoUSD.High
	}
	switch {
	case v == SearchFeeWaived:
		return 0
	case v <= 0:
		return d
	}
	return v
}

// Rates are one band's prices in pico-USD per token, as in Price.
type Rates struct {
	Input, CachedInput, CacheWrite, CacheWrite1h, Output int64
}

// rates are the rates that price usage of input tokens.
func (p Price) rates(input int64) Rates {
	if p.LongAbove > 0 && input > p.LongAbove {
		return p.Long
	}
	return Rates{Input: p.Input, CachedInput: p.CachedInput, CacheWrite: p.CacheWrite, CacheWrite1h: p.CacheWrite1h, Output: p.Output}
}

// WebSearchPicoUSD is the price of one web search an upstream runs for a
// request (spec.Usage.WebSearches), in pico-USD: Anthropic's $10 per 1,000
// searches (its web search tool guide), and OpenAI's $10 per 1,000 web
// search tool calls (its pricing page, built-in tools: the web_search
// tool on any model, web_search_preview on reasoning models), on top of
// the tokens the results add to the input.
const WebSearchPicoUSD = 10_000_000_000

// WebSearchPreviewPicoUSD is the price of one web search OpenAI's
// web_search_preview tool runs for a model that does not reason
// (spec.Usage.WebSearchPreview), in pico-USD: $25 per 1,000 calls, its
// search content tokens free (https://platform.openai.com/docs/pricing,
// built-in tools, "Web search preview (non-reasoning models)").
const WebSearchPreviewPicoUSD = 25_000_000_000

// FileSearchPicoUSD is the price of one file search an upstream runs for
// a request (spec.Usage.FileSearches), in pico-USD: OpenAI's $2.50 per
// 1,000 file search tool calls (its pricing page, built-in tools;
// Responses API only), on top of the tokens the results add to the input.
const FileSearchPicoUSD = 2_500_000_000

// SearchResultPicoUSD is the price of one web result OpenRouter's web
// plugin fetches with its Exa engine (spec.Usage.SearchResults), in
// pico-USD: $4 per 1,000 results, $0.02 a request at its default
// max_results of 5 (https://openrouter.ai/docs/features/web-search,
// pricing), on top of the tokens the results add to the prompt.
const SearchResultPicoUSD = 4_000_000_000

// ContainerGBPicoUSD is the price of one gigabyte-session of a container
// an upstream opens for a request's hosted code interpreter or shell tool
// (spec.Usage.ContainerGB), in pico-USD: OpenAI's $0.03 a session for its
// default 1 GB container, $0.12 for 4 GB, $0.48 for 16 GB and $1.92 for
// 64 GB (its pricing page, built-in tools: $0.03 a GB at the 20-minute
// session rate), on top of the tokens.
const ContainerGBPicoUSD = 30_000_000_000

// ImageTokenPicoUSD is the price of one image output token the Responses
// image_generation tool writes (spec.Usage.ImageTokens), in pico-USD:
// $40 per million, gpt-image-1's image output price, the dearest of the
// GPT Image models the tool may run (gpt-image-1.5 $32, gpt-image-1-mini
// $8: OpenAI's pricing page, image tokens), whichever the tool names.
const ImageTokenPicoUSD = 40_000_000

// CodeExecutionMinutePicoUSD is the price of one container-minute of
// Anthropic's code execution tool (spec.Usage.CodeExecutionMinutes), in
// pico-USD: $0.05 an hour per container (Anthropic's pricing page, "Code
// execution tool"), 833,333,333.3 pico-USD a minute rounded up. The
// organization's free monthly hours are not counted: high, never low.
const CodeExecutionMinutePicoUSD = 833_333_334

// scaled is p with every rate times num/den, rounded up (saturating).
func (p Price) scaled(num, den int64) Price {
	r := func(v int64) int64 { return ceilMulDiv(v, num, den) }
	l := p.Long
	return Price{Input: r(p.Input), CachedInput: r(p.CachedInput), CacheWrite: r(p.CacheWrite), CacheWrite1h: r(p.CacheWrite1h),
		Output: r(p.Output), LongAbove: p.LongAbove,
		Long:       Rates{Input: r(l.Input), CachedInput: r(l.CachedInput), CacheWrite: r(l.CacheWrite), CacheWrite1h: r(l.CacheWrite1h), Output: r(l.Output)},
		AudioInput: r(p.AudioInput), AudioOutput: r(p.AudioOutput), SearchRequest: p.SearchRequest}
}

// USDPerMTok is a model's list prices in USD per million tokens, as price
// lists give them. A zero CachedInput or CacheWrite means "same as Input";
// a zero CacheWrite1h means "same as CacheWrite"; a zero AudioInput or
// AudioOutput means "no audio price" (Price.AudioInput).
type USDPerMTok struct {
	Input, CachedInput, CacheWrite, CacheWrite1h, Output float64
	AudioInput, AudioOutput                              float64
}

// Price converts list prices to a Price, rounded to the nearest pico-USD
// per token (six decimals of USD per million tokens).
func (p USDPerMTok) Price() Price {
	r := p.rates()
	return Price{Input: r.Input, CachedInput: r.CachedInput, CacheWrite: r.CacheWrite, CacheWrite1h: r.CacheWrite1h, Output: r.Output,
		AudioInput: pico(p.AudioInput), AudioOutput: pico(p.AudioOutput)}
}

// rates converts list prices to Rates, filling the zero prices as Price
// documents.
func (p USDPerMTok) rates() Rates {
	if p.CachedInput == 0 {
		p.CachedInput = p.Input
	}
	if p.CacheWrite == 0 {
		p.CacheWrite = p.Input
	}
	if p.CacheWrite1h == 0 {
		p.CacheWrite1h = p.CacheWrite
	}
	return Rates{Input: pico(p.Input), CachedInput: pico(p.CachedInput), CacheWrite: pico(p.CacheWrite),
		CacheWrite1h: pico(p.CacheWrite1h), Output: pico(p.Output)}
}

// pico is a price in USD per million tokens as pico-USD per token.
func pico(usdPerMTok float64) int64 { return int64(math.Round(usdPerMTok * 1e6)) }

// PriceFromUSDPerMTok is USDPerMTok{Input: input, CachedInput: cachedInput,
// Output: output}.Price().
func PriceFromUSDPerMTok(input, cachedInput, output float64) Price {
	return USDPerMTok{Input: input, CachedInput: cachedInput, Output: output}.Price()
}

// MicroUSD is the cost of t at price p in micro-USD, rounded up to a whole
// micro-dollar: Σ tokens × pico-USD per token / 10^6, with t's cached and
// cache-written tokens (parts of its input) at their own prices, its audio
// tokens (parts of its input and output) at the audio prices but never
// below the text prices, and every other token at the long-context rates
// when t's input exceeds p.LongAbove. A usage does not say whether its
// cached tokens are text or audio: they are taken to be audio first (at
// the full audio price, as llmguard knows no cached-audio price), so only
// the cached tokens beyond the audio ones get the cached text price —
// never less than any split could cost. Negative counts are treated as
// zero. Each web search the usage reports adds WebSearchPicoUSD, each
// file search FileSearchPicoUSD, each web result SearchResultPicoUSD,
// a search context size its per-request search fee (Price.SearchRequest),
// each container gigabyte-session ContainerGBPicoUSD, each image output
// token of the image generation tool ImageTokenPicoUSD, and each
// container-minute of Anthropic's code execution CodeExecutionMinutePicoUSD.
// The result is never below t.BilledMicroUSD, what the upstream says it
// billed (OpenRouter's usage.cost): the provider it routed to may charge
// more than p.
func (p Price) MicroUSD(t spec.Usage) int64 { return p.microUSDOf(&t) }

// microUSDOf is MicroUSD of *t at *p, neither copied nor written.
func (p *Price) microUSDOf(t *spec.Usage) int64 {
	return max(p.tableMicroUSD(t), t.BilledMicroUSD)
}

// tableMicroUSD is *t at *p, what the price table says it costs, without
// the upstream's own figure (microUSDOf).
func (p *Price) tableMicroUSD(t *spec.Usage) int64 {
	if t.AudioInputTokens > 0 || t.AudioOutputTokens > 0 || t.CacheWriteTokens > 0 || t.WebSearches > 0 ||
		t.FileSearches > 0 || t.SearchContext != spec.SearchContextNone || t.SearchResults > 0 || t.ContainerGB > 0 ||
		t.ImageTokens > 0 || t.CodeExecutionMinutes > 0 {
		return p.microUSD(*t)
	}
	// No audio, no cache writes, no web searches, as nearly every chat
	// request's reservation and settlement: three of microUSD's eight
	// products, the others being zero (TestTextMicroUSDSameAsGeneral,
	// FuzzTextMicroUSD). microUSD costs about 210 instructions a call
	// under callgrind, this about 110.
	in := clamp0(t.InputTokens)
	r := p.rates(in)
	cached := min(clamp0(t.CachedInputTokens), in)
	h1, l1 := bits.Mul64(uint64(in-cached), uint64(clamp0(r.Input)))
	h2, l2 := bits.Mul64(uint64(cached), uint64(clamp0(r.CachedInput)))
	h3, l3 := bits.Mul64(uint64(clamp0(t.OutputTokens)), uint64(clamp0(r.Output)))
	lo, c1 := bits.Add64(l1, l2, 0)
	lo, c2 := bits.Add64(lo, l3, 0)
	return ceilMicro(h1+h2+h3+c1+c2, lo)
}

// ceilMicro is the 128-bit pico-USD amount hi:lo in micro-USD, rounded
// up, saturating at math.MaxInt64.
func ceilMicro(hi, lo uint64) int64 {
	if hi >= 1e6 { // quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, 1e6)
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// microUSD is MicroUSD of any usage: the reference its fast path is
// tested against.
func (p Price) microUSD(t spec.Usage) int64 {
	in := clamp0(t.InputTokens)
	r := p.rates(in)
	out := clamp0(t.OutputTokens)
	audioIn := min(clamp0(t.AudioInputTokens), in)
	audioOut := min(clamp0(t.AudioOutputTokens), out)
	text := in - audioIn
	cached := min(max(clamp0(t.CachedInputTokens)-audioIn, 0), text)
	write := min(clamp0(t.CacheWriteTokens), text-cached)
	write1h := min(clamp0(t.CacheWrite1hTokens), write)
	uncached := text - cached - write
	var sum picoSum
	sum.add(uncached, r.Input)
	sum.add(cached, r.CachedInput)
	sum.add(write-write1h, r.CacheWrite)
	sum.add(write1h, r.CacheWrite1h)
	sum.add(out-audioOut, r.Output)
	sum.add(audioIn, max(p.AudioInput, r.Input))
	sum.add(audioOut, max(p.AudioOutput, r.Output))
	sum.searchFees(&p, &t)
	sum.add(clamp0(int64(t.ContainerGB)), ContainerGBPicoUSD)
	sum.add(clamp0(int64(t.ImageTokens)), ImageTokenPicoUSD)
	sum.add(int64(t.CodeExecutionMinutes), CodeExecutionMinutePicoUSD)
	return max(sum.micro(), t.BilledMicroUSD)
}

// SearchMicroUSD is the search fees of t at price p in micro-USD, rounded
// up to a whole micro-dollar: its web searches (WebSearchPicoUSD each),
// file searches (FileSearchPicoUSD each), per-request search fee at its
// search context size (Price.SearchRequest) and web results
// (SearchResultPicoUSD each); negative counts are treated as zero. It is
// the part of MicroUSD(t) those fees make, rounded on its own (so at most
// 1 µUSD above their exact share), for the ledger's search_fee_micro_usd.
func (p Price) SearchMicroUSD(t spec.Usage) int64 {
	var sum picoSum
	sum.searchFees(&p, &t)
	return sum.micro()
}

// picoSum is a sum of pico-USD amounts, count × price each, held in 128
// bits (hi, lo) so that no product or sum overflows; micro rounds it up to
// whole micro-dollars.
type picoSum struct{ hi, lo uint64 }

// add adds n × price (pico-USD; a negative price counts as 0).
func (s *picoSum) add(n, price int64) {
	h, l := bits.Mul64(uint64(n), uint64(clamp0(price)))
	var c uint64
	s.lo, c = bits.Add64(s.lo, l, 0)
	s.hi += h + c
}

// searchFees adds t's search fees at p: each web search WebSearchPicoUSD
// (WebSearchPreviewPicoUSD when t.WebSearchPreview), each file search
// FileSearchPicoUSD, its search context size's per-request fee
// (Price.SearchRequest), each web result SearchResultPicoUSD; negative
// counts count as 0.
func (s *picoSum) searchFees(p *Price, t *spec.Usage) {
	web := int64(WebSearchPicoUSD)
	if t.WebSearchPreview {
		web = WebSearchPreviewPicoUSD
	}
	s.add(clamp0(t.WebSearches), web)
	s.add(clamp0(t.FileSearches), FileSearchPicoUSD)
	s.add(1, p.SearchRequest.of(t.SearchContext))
	s.add(clamp0(t.SearchResults), SearchResultPicoUSD)
}

// micro is the sum in micro-USD, rounded up (ceilMicro).
func (s picoSum) micro() int64 { return ceilMicro(s.hi, s.lo) }

func clamp0(n int64) int64 { return max(n, 0) }

// Units is the cost of t in the rule's unit: 1 for requests, micro-USD at
// price for usd, the unit's token count (spec.Unit.Tokens) otherwise.
func (r *Rule) Units(t spec.Usage, price Price) int64 { return r.UnitsOf(&t, &price) }

// UnitsOf is Units of *t at *price, neither copied: the meter prices each
// rule of every request twice (reservation, settlement), and passing the
// usage and the price by value (about 30 words) cost some 50 instructions
// a call under callgrind. t and price are only read.
func (r *Rule) UnitsOf(t *spec.Usage, price *Price) int64 {
	switch {
	case r.Unit == UnitRequests, r.Unit == UnitConcurrent:
		return 1
	case r.Unit == UnitUSD:
		return price.microUSDOf(t)
	default:
		return r.Unit.Tokens(*t)
	}
}
