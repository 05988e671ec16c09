package policy

import (
	"math"
	"strconv"
	"strings"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// ServiceTier is the processing tier a request asks for, which decides its
// price; defined once in package spec.
type ServiceTier = spec.ServiceTier

// Service tiers.
const (
	TierStandard = spec.TierStandard // "default" (also "scale", "standard", Groq's "on_demand")
	TierPriority = spec.TierPriority // "priority"
	TierFlex     = spec.TierFlex     // "flex"
)

// parseTier reads a config's default_service_tier ("" is the standard
// tier; Validate refuses other values).
func parseTier(s string) ServiceTier {
	t, _ := spec.ParseServiceTier(s)
	return t
}

// modelPrices are one priced model's prices in each tier. priority is nil
// when the price table gives none (such a request is not priced); flex
// falls back to the standard prices, which cost no less.
type modelPrices struct {
	standard, flex Price
	priority       *Price
	// aliasOf is the model an alias (alias_of) stands for, "" for a model
	// priced by its own name.
	aliasOf string
}

// buildPrices compiles every priced model of c (its own prices, or its
// alias target's) into pico-USD prices per tier.
func buildPrices(c *config.Config) map[string]modelPrices {
	out := make(map[string]modelPrices, len(c.Models))
	for name, m := range c.Models {
		target := m.AliasOf
		if target != "" {
			t, ok := c.Models[target]
			if !ok || t.AliasOf != "" || !t.Priced() { // Validate refuses these
				continue
			}
			m = t
		}
		if !m.Priced() {
			continue
		}
		mp := compileModel(m)
		mp.aliasOf = target
		out[name] = mp
	}
	return out
}

// compileModel is a priced model's prices per tier. A tier or band field
// left at zero is derived so as never to under-count: a long-context
// field scales the standard field by the band's input ratio (Anthropic's
// long-context cache writes keep their 1.25× of input); the priority tier
// past the threshold is its own band if given, else the higher of the
// priority and the standard long-context rates, field by field.
func compileModel(m config.Model) modelPrices {
	std := tierPrice(m.Standard(), m.LongContext, nil)
	std.SearchRequest = searchFees(m.SearchRequestUSDPerK)
	mp := modelPrices{standard: std, flex: std}
	if m.Flex != nil && m.Flex.Priced() {
		mp.flex = tierPrice(*m.Flex, m.LongContext, nil)
		if m.LongContext != nil { // flex past the threshold: no cheaper than standard's band
			mp.flex.LongAbove, mp.flex.Long = std.LongAbove, std.Long
		}
		mp.flex.AudioInput, mp.flex.AudioOutput = or(mp.flex.AudioInput, std.AudioInput), or(mp.flex.AudioOutput, std.AudioOutput)
		mp.flex.SearchRequest = std.SearchRequest
	}
	if m.Priority != nil && m.Priority.Priced() {
		p := tierPrice(*m.Priority, m.LongContext, &std)
		p.AudioInput, p.AudioOutput = max(p.AudioInput, std.AudioInput), max(p.AudioOutput, std.AudioOutput)
		p.SearchRequest = std.SearchRequest
		mp.priority = &p
	}
	return mp
}

// tierPrice converts one tier's list prices, with the model's long-context
// band (nil: none). For the priority tier, std is the standard tier's
// compiled price: without a priority band of its own, the band is the
// higher of the priority rates and std's band.
func tierPrice(t config.TierPrices, lc *config.LongContext, std *Price) Price {
	p := usd(t).Price()
	if lc == nil {
		return p
	}
	p.LongAbove = lc.AboveInputTokens
	base := p.rates(0)
	switch {
	case std == nil:
		p.Long = deriveBand(usd(lc.TierPrices), base)
	case lc.Priority != nil && lc.Priority.Priced():
		p.Long = deriveBand(usd(*lc.Priority), base)
	default:
		p.Long = maxRates(base, std.Long)
	}
	return p
}

// deriveBand converts a long-context band's list prices, filling each
// price the band leaves at zero from the tier's rate scaled by the band's
// input ratio (rounded up): Anthropic's 1-hour cache writes at 2× input stay
// 2× the band's input.
func deriveBand(band USDPerMTok, base Rates) Rates {
	r := Rates{Input: pico(band.Input), CachedInput: pico(band.CachedInput), CacheWrite: pico(band.CacheWrite),
		CacheWrite1h: pico(band.CacheWrite1h), Output: pico(band.Output)}
	if r.Input == 0 {
		r.Input = base.Input
	}
	scale := func(dst *int64, v int64) {
		if *dst != 0 {
			return
		}
		if base.Input == 0 {
			*dst = max(v, r.Input)
			return
		}
		*dst = ceilMulDiv(v, r.Input, base.Input)
	}
	scale(&r.CachedInput, base.CachedInput)
	scale(&r.CacheWrite, base.CacheWrite)
	scale(&r.CacheWrite1h, base.CacheWrite1h)
	scale(&r.Output, base.Output)
	return r
}

// ceilMulDiv is ⌈v × num / den⌉ for prices (pico-USD per token, at most
// 10^12 by validation), saturating rather than overflowing.
func ceilMulDiv(v, num, den int64) int64 {
	if v != 0 && num > (1<<62)/v {
		return 1 << 62
	}
	return (v*num + den - 1) / den
}

// or is v, or else (v zero) the fallback.
func or(v, fallback int64) int64 {
	if v == 0 {
		return fallback
	}
	return v
}

// maxRates is the higher of a's and b's rates, field by field.
func maxRates(a, b Rates) Rates {
	return Rates{Input: max(a.Input, b.Input), CachedInput: max(a.CachedInput, b.CachedInput), CacheWrite: max(a.CacheWrite, b.CacheWrite),
		CacheWrite1h: max(a.CacheWrite1h, b.CacheWrite1h), Output: max(a.Output, b.Output)}
}

// searchFees is a model's per-request search fees, USD per 1,000
// requests, as pico-USD per request (rounded to the nearest).
func searchFees(f config.SearchFees) SearchFees {
	fee := func(n int, usdPerK float64) int64 {
		if f.Waived(n) {
			return SearchFeeWaived
		}
		return int64(math.Round(usdPerK * 1e9)) // $1 per 1,000 is 10^9 pico-USD a request
	}
	return SearchFees{Low: fee(0, f.Low), Medium: fee(1, f.Medium), High: fee(2, f.High)}
}

// usd is a config's tier prices as USDPerMTok.
func usd(t config.TierPrices) USDPerMTok {
	return USDPerMTok{Input: t.InputUSDPerMTok, CachedInput: t.CachedInputUSDPerMTok, CacheWrite: t.CacheWriteUSDPerMTok,
		CacheWrite1h: t.CacheWrite1hUSDPerMTok, Output: t.OutputUSDPerMTok,
		AudioInput: t.AudioInputUSDPerMTok, AudioOutput: t.AudioOutputUSDPerMTok}
}

// Quote is how one request is priced: its model and service tier
// resolved against the price table.
type Quote struct {
	// Label is the priced model name the request's model resolves to: the
	// name itself, the model a dated snapshot is of, or an alias's name.
	// Metrics label models by it and per_model buckets are keyed by it, so
	// its values come from the config and the price table, never from
	// callers. "" when the model has no price (or the request names none).
	Label string
	// AliasOf is the model Label is an alias of (alias_of), "" when Label is
	// no alias: rules on that model hold the alias too.
	AliasOf string
	// Price is the request's price; zero when Priced is false.
	Price Price
	// Priced: Price applies, the model's own or (Default) default_price.
	// False: a usd limit cannot count the request.
	Priced bool
	// Default: the model has no price of its own; Price is default_price.
	Default bool
	// Tier is the service tier the request is priced in.
	Tier ServiceTier
	// Missing names the config key that would price the request when
	// Priced is false: `models."<model>"` (its prices, or alias_of), or
	// `models."<label>".priority` for a priority request.
	Missing string
}

// Quote prices a request for model in the service tier it asks for
// (serviceTier: the request's service_tier as sent, or the tier an answer
// says it was served at; "" and "auto" take the config's
// default_service_tier, "default", "standard", "scale" and "on_demand" the
// standard tier, a name llmguard does not know the dearest: TierOf). The
// model resolves to a
// priced name by its exact name (an alias is an exact name), or as a
// dated snapshot of a priced name (see SnapshotOf), or as either in
// another ASCII case (`GPT-4o-Mini` is gpt-4o-mini, as an upstream that
// reads names case-insensitively serves it: see MatchModel) when only
// one priced name is spelled so, or as either in another of Ollama's
// spellings of the model (`library/llama3.1:latest` is llama3.1: see
// spec.CanonModel) when only one priced name has that canonical form;
// anything else is unpriced, or priced at default_price when the config
// sets one.
func (p *Policy) Quote(model, serviceTier string) Quote {
	q := Quote{Tier: p.tierOf(serviceTier)}
	// A model priced by its own name, as most requests' are, is looked up
	// once (perf30: priced, then the price, looked it up twice).
	label := model
	mp, ok := p.prices[model]
	if !ok {
		if label, ok = p.priced(model); !ok {
			if p.defaultPrice != nil {
				q.Price, q.Priced, q.Default = *p.defaultPrice, true, true
				return q
			}
			q.Missing = "models." + strconv.Quote(model)
			return q
		}
		mp = p.prices[label]
	}
	q.Label = label
	q.AliasOf = mp.aliasOf
	switch q.Tier {
	case TierPriority:
		if mp.priority == nil {
			q.Missing = "models." + strconv.Quote(label) + ".priority"
			return q
		}
		q.Price = *mp.priority
	case TierFlex:
		q.Price = mp.flex
	default:
		q.Price = mp.standard
	}
	q.Priced = true
	return q
}

// ForAudio is q for a request that sends or asks for audio (a chat
// request's input_audio part, "audio" or "modalities" naming audio, or an
// earlier audio answer by id): audio tokens cost 8–16× the text tokens of
// the same model (gpt-4o-audio-preview: $40 and $80 per million against
// $2.50 and $10, https://developers.openai.com/api/docs/models/gpt-4o-audio-preview),
// so a price without both audio prices does not price it: Priced false,
// and Missing names `models."<label>".audio_input_usd_per_mtok`
// (default_price's for a model priced by it). A q already unpriced is
// returned as it is.
func (q Quote) ForAudio() Quote {
	if !q.Priced || q.Price.AudioInput > 0 && q.Price.AudioOutput > 0 {
		return q
	}
	q.Priced, q.Price = false, Price{}
	switch {
	case q.Default:
		q.Default, q.Missing = false, "default_price.audio_input_usd_per_mtok"
	case q.AliasOf != "": // an alias takes its target's prices
		q.Missing = "models." + strconv.Quote(q.AliasOf) + ".audio_input_usd_per_mtok"
	default:
		q.Missing = "models." + strconv.Quote(q.Label) + ".audio_input_usd_per_mtok"
	}
	return q
}

// GeoPremium is the multiplier, num/den, of every token price of a
// request whose inference is pinned to a geography: Anthropic's data
// residency, 1.1x for inference_geo "us" (its pricing page and
// https://platform.claude.com/docs/en/build-with-claude/data-residency).
const (
	GeoPremiumNum = 11
	GeoPremiumDen = 10
)

// ForGeo is q for a request whose inference is pinned to a geography: its
// price times GeoPremiumNum/GeoPremiumDen, each rate rounded up to the
// pico-USD. An unpriced q is returned as it is.
func (q Quote) ForGeo() Quote {
	if !q.Priced {
		return q
	}
	q.Price = q.Price.scaled(GeoPremiumNum, GeoPremiumDen)
	return q
}

// TierOf is the tier a service_tier value names, as Quote reads it: a
// request's (the tier it asks for; "" and "auto" are
// default_service_tier's) or an answer's (the tier it was served at,
// spec.Usage.ServiceTier: "default", "priority", "flex", "scale"). A name
// llmguard does not know (spec.TierUnread among them) is TierPriority, the
// dearest: never priced below what it may cost.
func (p *Policy) TierOf(s string) ServiceTier { return p.tierOf(s) }

// tierOf is the tier a request's service_tier value asks for.
func (p *Policy) tierOf(s string) ServiceTier {
	switch s {
	case "", "auto":
		return p.defaultTier
	case "priority":
		return TierPriority
	case "flex":
		return TierFlex
	case "default", "standard", "scale", "on_demand":
		// on_demand is Groq's standard tier, the one a request naming none
		// gets (https://console.groq.com/docs/service-tiers).
		return TierStandard
	case "fast":
		// Anthropic's fast mode (weigher.FastModeTier), billed at 2-6x
		// the standard rates: the dearest tier, whose prices an operator
		// sets to the model's fast-mode prices.
		return TierPriority
	}
	// A spelling llmguard does not know ("Priority", " priority") may be
	// one an upstream accepts: price it at the dearest tier, never below.
	return TierPriority
}

// priced is the priced name model resolves to: model itself, or the model
// it is a dated snapshot of.
func (p *Policy) priced(model string) (string, bool) {
	if _, ok := p.prices[model]; ok {
		return model, true
	}
	if base, ok := SnapshotOf(model); ok {
		if _, ok := p.prices[base]; ok {
			return base, true
		}
	}
	// Another case: the one priced name spelled so, if any.
	folded := spec.FoldModel(model)
	if name := p.folded[folded]; name != "" {
		return name, true
	}
	if base, ok := SnapshotOf(folded); ok {
		if name := p.folded[base]; name != "" {
			return name, true
		}
	}
	// Another of Ollama's spellings (llama3.1 for llama3.1:latest): the
	// one priced name of the same canonical form, if any.
	canon := spec.CanonModel(model)
	if name := p.canon[canon]; name != "" {
		return name, true
	}
	if base, ok := SnapshotOf(canon); ok {
		if name := p.canon[base]; name != "" {
			return name, true
		}
	}
	return "", false
}

// formNames maps each priced name's form (spec.FoldModel's,
// spec.CanonModel's) to the name; a form that two names share maps to ""
// (neither is meant more than the other).
func formNames(prices map[string]modelPrices, form func(string) string) map[string]string {
	out := make(map[string]string, len(prices))
	for name := range prices {
		f := form(name)
		if prev, seen := out[f]; seen && prev != name {
			out[f] = ""
			continue
		}
		out[f] = name
	}
	return out
}

// PricedModels returns the names the policy prices (aliases included),
// in no particular order. The slice is the caller's.
func (p *Policy) PricedModels() []string {
	out := make([]string, 0, len(p.prices))
	for name := range p.prices {
		out = append(out, name)
	}
	return out
}

// SnapshotOf returns the model a dated snapshot name is of: name without a
// date suffix `-YYYY-MM-DD` (gpt-4o-2024-08-06), `-YYYYMMDD`
// (claude-sonnet-4-5-20250929) or `-MMDD` (gpt-4-0613, the form of older
// OpenAI names), with a plausible date (a year from 2000, months 01–12,
// days 01–31). ok is false for any other name: a name that merely starts
// with another (gpt-5-pro, o3-pro, claude-opus-4-1) is not a snapshot of
// it, since providers price such models differently.
func SnapshotOf(name string) (base string, ok bool) {
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	monthDay := func(mm, dd string) bool {
		m, _ := strconv.Atoi(mm)
		d, _ := strconv.Atoi(dd)
		return m >= 1 && m <= 12 && d >= 1 && d <= 31
	}
	n := len(name)
	switch {
	case n > 11 && name[n-11] == '-' && name[n-6] == '-' && name[n-3] == '-' &&
		digits(name[n-10:n-6]) && digits(name[n-5:n-3]) && digits(name[n-2:]) &&
		name[n-10:n-8] >= "20" && monthDay(name[n-5:n-3], name[n-2:]):
		return name[:n-11], true // -YYYY-MM-DD
	case n > 9 && name[n-9] == '-' && digits(name[n-8:]) &&
		name[n-8:n-6] >= "20" && monthDay(name[n-4:n-2], name[n-2:]):
		return name[:n-9], true // -YYYYMMDD
	case n > 5 && name[n-5] == '-' && digits(name[n-4:]) && monthDay(name[n-4:n-2], name[n-2:]):
		return name[:n-5], true // -MMDD
	}
	return "", false
}

// buildImagePrices turns per-image prices in USD into micro-USD, rounded
// up (after rounding away the float noise of a per-pixel price: $0.04 is
// 40,000 µUSD, not 40,001).
func buildImagePrices(usd map[string]float64) map[string]int64 {
	out := make(map[string]int64, len(usd))
	for k, v := range usd {
		out[k] = int64(math.Ceil(math.Round(v*1e9) / 1e3))
	}
	return out
}

// ImagePrice is the price of one image of model (billed per image: DALL·E)
// of size ("WxH", "" or "auto" for the default 1024x1024) in quality ("",
// "auto" or "standard" for the standard quality; "hd"), in micro-USD. An
// image whose size or quality the table does not list costs the dearest
// image of the model, never less. ok is false for a model the table does
// not price per image.
func (p *Policy) ImagePrice(model, quality, size string) (microUSD int64, ok bool) {
	if size == "" || size == "auto" {
		size = "1024x1024"
	}
	for _, q := range []string{quality, "standard", ""} {
		if q == "auto" {
			continue
		}
		if v, ok := p.imagePrices[config.ImagePriceKey(model, q, size)]; ok && (q == quality || quality == "" || quality == "auto" || quality == "standard") {
			return v, true
		}
	}
	prefix := model + "|"
	for k, v := range p.imagePrices {
		if strings.HasPrefix(k, prefix) {
			microUSD, ok = max(microUSD, v), true
		}
	}
	return microUSD, ok
}
