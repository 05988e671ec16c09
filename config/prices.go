package config

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// DefaultPricesJSON is llmguard's shipped price table (config/prices.json),
// in the format of LiteLLM's public model_prices_and_context_window.json:
// USD per token per model. Its "llmguard_price_table" entry gives the date
// and the source. It is the base layer of every config's prices.
//
//go:embed prices.json
var DefaultPricesJSON []byte

// LiteLLM-format price fields llmguard reads, USD per token (the names of
// LiteLLM's model_prices_and_context_window.json; other fields are
// ignored). A tier's fields end in _priority or _flex; a long-context
// band's fields add _above_<N>k_tokens (before the tier suffix).
var litellmFields = []struct {
	name string
	set  func(t *TierPrices, v float64)
}{
	{"input_cost_per_token", func(t *TierPrices, v float64) { t.InputUSDPerMTok = v }},
	{"output_cost_per_token", func(t *TierPrices, v float64) { t.OutputUSDPerMTok = v }},
	{"cache_read_input_token_cost", func(t *TierPrices, v float64) { t.CachedInputUSDPerMTok = v }},
	{"cache_creation_input_token_cost", func(t *TierPrices, v float64) { t.CacheWriteUSDPerMTok = v }},
	{"cache_creation_input_token_cost_above_1hr", func(t *TierPrices, v float64) { t.CacheWrite1hUSDPerMTok = v }},
	{"input_cost_per_audio_token", func(t *TierPrices, v float64) { t.AudioInputUSDPerMTok = v }},
	{"output_cost_per_audio_token", func(t *TierPrices, v float64) { t.AudioOutputUSDPerMTok = v }},
}

// litellmKey matches a LiteLLM price field: its base name, an optional
// long-context band (_above_<N>k_tokens) and an optional tier.
var litellmKey = regexp.MustCompile(`^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost(?:_above_1hr)?|input_cost_per_audio_token|output_cost_per_audio_token)(?:_above_([0-9]{1,6})k_tokens)?(?:_(priority|flex))?$`)

// litellmEntry gathers one model's prices, by tier and band, as read.
type litellmEntry struct {
	standard, priority, flex TierPrices
	hasStandardInput         bool
	hasStandardOutput        bool
	hasPriority, hasFlex     bool
	longAbove                int64 // lowest band threshold, in tokens; 0: none
	// search is search_context_cost_per_query, USD per 1,000 requests.
	search             SearchFees
	long, longPriority TierPrices
	hasLongPriority    bool
}

// ParsePrices reads a LiteLLM-format price file into models with prices in
// USD per million tokens (per-token cost × 10^6): the standard tier, the
// priority and flex tiers (fields ending in _priority, _flex) and a
// long-context band (fields with _above_<N>k_tokens; when an entry has
// several bands, the lowest threshold with the highest price of each
// field, so that no band is under-counted). Entries without
// input_cost_per_token (metadata, image or audio models) are skipped, and
// so are entries without output_cost_per_token (absent or null) unless
// their mode is embedding or moderation: their output would be free.
// Errors: the JSON is invalid or nests deeper than 128 levels (checked by a
// flat scan before encoding/json reads it), is not an object of objects, or
// a price is negative or not finite.
func ParsePrices(b []byte) (map[string]Model, error) {
	if err := jsonscan.Check(b, jsonscan.Options{}); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	out := make(map[string]Model, len(raw))
	for name, entry := range raw {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(entry, &fields); err != nil {
			continue
		}
		e, err := readLitellmEntry(fields)
		if err != nil {
			return nil, fmt.Errorf("prices: model %q: %w", name, err)
		}
		if e == nil || !e.hasStandardInput {
			continue
		}
		if !e.hasStandardOutput && !billsNoOutput(fields) {
			// An entry with an input price and no output price would
			// make output free under usd limits: left unpriced, so a
			// usd limit refuses the model's requests (model_not_priced)
			// until a layer prices its output.
			continue
		}
		m := e.model()
		if v, ok := fields["max_input_tokens"]; ok {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil || n < 0 {
				return nil, fmt.Errorf("prices: model %q: max_input_tokens %s is not a positive integer", name, v)
			}
			m.MaxInputTokens = n
		}
		out[name] = m
	}
	return out, nil
}

// billsNoOutput reports whether a LiteLLM entry's "mode" is one whose
// calls produce no output tokens (embedding, moderation), so that an
// input price alone prices it fully.
func billsNoOutput(fields map[string]json.RawMessage) bool {
	var mode string
	_ = json.Unmarshal(fields["mode"], &mode)
	return mode == "embedding" || mode == "moderation"
}

// readLitellmEntry reads the price fields of one entry; nil when a price
// field is not a number (the entry is then skipped, as before tiers were
// read). Errors: a negative or non-finite price, or one so large that it is
// infinite in USD per million tokens.
func readLitellmEntry(fields map[string]json.RawMessage) (*litellmEntry, error) {
	e := &litellmEntry{}
	for key, v := range fields {
		if key == "search_context_cost_per_query" {
			if err := e.readSearchFees(v); err != nil {
				return nil, err
			}
			continue
		}
		m := litellmKey.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		if string(v) == "null" {
			continue // no price, where json.Unmarshal would read 0
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, nil
		}
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("negative or non-finite price %v in %s", f, key)
		}
		// USD per token → USD per million tokens, kept to the pico-USD
		// per token llmguard prices in (1e-07 × 1e6 is 0.09999…).
		f = math.Round(f*1e12) / 1e6
		if math.IsInf(f, 0) { // past 1.8e296 USD a token: validate's bound would refuse it, but ParsePrices promises finite prices
			return nil, fmt.Errorf("price %v in %s is past any price", v, key)
		}
		base, band, tier := m[1], m[2], m[3]
		var dst *TierPrices
		switch {
		case band != "":
			above, _ := strconv.ParseInt(band, 10, 64)
			above *= 1000
			if e.longAbove == 0 || above < e.longAbove {
				e.longAbove = above
			}
			switch tier {
			case "priority":
				dst, e.hasLongPriority = &e.longPriority, true
			case "flex":
				continue // flex costs no more than standard: the standard band covers it
			default:
				dst = &e.long
			}
		case tier == "priority":
			dst, e.hasPriority = &e.priority, true
		case tier == "flex":
			dst, e.hasFlex = &e.flex, true
		default:
			dst = &e.standard
			switch base {
			case "input_cost_per_token":
				e.hasStandardInput = true
			case "output_cost_per_token":
				e.hasStandardOutput = true
			}
		}
		for _, lf := range litellmFields {
			if lf.name == base {
				setMax(dst, lf.set, f)
			}
		}
	}
	return e, nil
}

// readSearchFees reads LiteLLM's search_context_cost_per_query, an object
// of USD per request by size (search_context_size_low, _medium, _high:
// Perplexity's and OpenAI's search models), into e.search as USD per
// 1,000 requests. A value that is not an object, and a size that is not a
// number, set nothing. Errors: a negative or non-finite fee.
func (e *litellmEntry) readSearchFees(v json.RawMessage) error {
	var sizes map[string]json.RawMessage
	if json.Unmarshal(v, &sizes) != nil {
		return nil
	}
	for _, sz := range []struct {
		key string
		dst *float64
	}{{"search_context_size_low", &e.search.Low}, {"search_context_size_medium", &e.search.Medium}, {"search_context_size_high", &e.search.High}} {
		var f float64
		if raw, ok := sizes[sz.key]; !ok || json.Unmarshal(raw, &f) != nil {
			continue
		}
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("negative or non-finite fee %v in search_context_cost_per_query.%s", f, sz.key)
		}
		f = math.Round(f*1e3*1e9) / 1e9 // USD per request → per 1,000, to the pico-USD per request
		// As for a token price: validate's bound refuses any such fee,
		// but ParsePrices promises finite ones.
		if math.IsInf(f, 0) {
			return fmt.Errorf("fee %v in search_context_cost_per_query.%s is past any price", sizes[sz.key], sz.key)
		}
		*sz.dst = f
	}
	return nil
}

// setMax raises one field of t (the one set sets) to v: an entry's bands
// all fill one band, each field at its highest price.
func setMax(t *TierPrices, set func(*TierPrices, float64), v float64) {
	var probe TierPrices
	set(&probe, v)
	*t = maxTier(*t, probe)
}

// maxTier is the higher of a's and b's prices, field by field.
func maxTier(a, b TierPrices) TierPrices {
	return TierPrices{InputUSDPerMTok: max(a.InputUSDPerMTok, b.InputUSDPerMTok),
		CachedInputUSDPerMTok:  max(a.CachedInputUSDPerMTok, b.CachedInputUSDPerMTok),
		CacheWriteUSDPerMTok:   max(a.CacheWriteUSDPerMTok, b.CacheWriteUSDPerMTok),
		CacheWrite1hUSDPerMTok: max(a.CacheWrite1hUSDPerMTok, b.CacheWrite1hUSDPerMTok),
		OutputUSDPerMTok:       max(a.OutputUSDPerMTok, b.OutputUSDPerMTok),
		AudioInputUSDPerMTok:   max(a.AudioInputUSDPerMTok, b.AudioInputUSDPerMTok),
		AudioOutputUSDPerMTok:  max(a.AudioOutputUSDPerMTok, b.AudioOutputUSDPerMTok)}
}

// model is the Model the entry describes.
func (e *litellmEntry) model() Model {
	s := e.standard
	m := Model{InputUSDPerMTok: s.InputUSDPerMTok, CachedInputUSDPerMTok: s.CachedInputUSDPerMTok,
		CacheWriteUSDPerMTok: s.CacheWriteUSDPerMTok, CacheWrite1hUSDPerMTok: s.CacheWrite1hUSDPerMTok,
		OutputUSDPerMTok: s.OutputUSDPerMTok, AudioInputUSDPerMTok: s.AudioInputUSDPerMTok, AudioOutputUSDPerMTok: s.AudioOutputUSDPerMTok,
		SearchRequestUSDPerK: e.search}
	if e.hasPriority {
		p := e.priority
		m.Priority = &p
	}
	if e.hasFlex {
		f := e.flex
		m.Flex = &f
	}
	if e.longAbove > 0 {
		m.LongContext = &LongContext{AboveInputTokens: e.longAbove, TierPrices: e.long}
		if e.hasLongPriority {
			lp := e.longPriority
			m.LongContext.Priority = &lp
		}
	}
	return m
}

// mergePrices fills c.Models from the price layers, lowest first: a model
// absent from c.Models is added with the layer's prices; a model present
// keeps every price it sets and takes the unset (zero) ones from the
// layer, and each tier or band it leaves unset (priority, flex,
// long_context). An alias (alias_of) takes nothing from the layers: its
// prices are its target's.
func (c *Config) mergePrices(layers ...map[string]Model) {
	merged := map[string]Model{}
	for _, layer := range layers {
		for name, m := range layer {
			merged[name] = m
		}
	}
	if c.Models == nil {
		c.Models = map[string]Model{}
	}
	for name, p := range merged {
		m, ok := c.Models[name]
		if !ok {
			c.Models[name] = p
			continue
		}
		if m.AliasOf != "" {
			continue
		}
		fill := func(dst *float64, v float64) {
			if *dst == 0 {
				*dst = v
			}
		}
		fill(&m.InputUSDPerMTok, p.InputUSDPerMTok)
		fill(&m.CachedInputUSDPerMTok, p.CachedInputUSDPerMTok)
		fill(&m.CacheWriteUSDPerMTok, p.CacheWriteUSDPerMTok)
		fill(&m.CacheWrite1hUSDPerMTok, p.CacheWrite1hUSDPerMTok)
		fill(&m.OutputUSDPerMTok, p.OutputUSDPerMTok)
		fill(&m.AudioInputUSDPerMTok, p.AudioInputUSDPerMTok)
		fill(&m.AudioOutputUSDPerMTok, p.AudioOutputUSDPerMTok)
		for n, f := range [...]struct{ dst, v *float64 }{{&m.SearchRequestUSDPerK.Low, &p.SearchRequestUSDPerK.Low},
			{&m.SearchRequestUSDPerK.Medium, &p.SearchRequestUSDPerK.Medium}, {&m.SearchRequestUSDPerK.High, &p.SearchRequestUSDPerK.High}} {
			if !m.SearchRequestUSDPerK.Waived(n) { // a fee the config waives stays waived
				fill(f.dst, *f.v)
			}
		}
		if m.MaxInputTokens == 0 {
			m.MaxInputTokens = p.MaxInputTokens
		}
		// A tier or band the entry writes takes the prices it leaves
		// unset from the same tier below, as the standard tier does: a
		// priority block giving only an input price must not make
		// priority output free.
		m.Priority = fillTier(m.Priority, p.Priority)
		m.Flex = fillTier(m.Flex, p.Flex)
		switch {
		case m.LongContext == nil:
			m.LongContext = p.LongContext
		case p.LongContext != nil:
			lc := *m.LongContext
			if lc.AboveInputTokens == 0 {
				lc.AboveInputTokens = p.LongContext.AboveInputTokens
			}
			lc.TierPrices = *fillTier(&lc.TierPrices, &p.LongContext.TierPrices)
			lc.Priority = fillTier(lc.Priority, p.LongContext.Priority)
			m.LongContext = &lc
		}
		c.Models[name] = m
	}
}

// fillTier is t with each price it leaves at zero taken from below (a
// copy; t itself is not changed), or below when t is nil.
func fillTier(t, below *TierPrices) *TierPrices {
	if t == nil || below == nil {
		return cmp.Or(t, below)
	}
	f := *t
	for _, p := range []struct{ dst, src *float64 }{
		{&f.InputUSDPerMTok, &below.InputUSDPerMTok}, {&f.CachedInputUSDPerMTok, &below.CachedInputUSDPerMTok},
		{&f.CacheWriteUSDPerMTok, &below.CacheWriteUSDPerMTok}, {&f.CacheWrite1hUSDPerMTok, &below.CacheWrite1hUSDPerMTok},
		{&f.OutputUSDPerMTok, &below.OutputUSDPerMTok}, {&f.AudioInputUSDPerMTok, &below.AudioInputUSDPerMTok},
		{&f.AudioOutputUSDPerMTok, &below.AudioOutputUSDPerMTok},
	} {
		if *p.dst == 0 {
			*p.dst = *p.src
		}
	}
	return &f
}

// loadPrices reads the embedded table and c.PricesFile (relative to dir)
// and merges them under c.Models.
func (c *Config) loadPrices(dir string) error {
	base, err := ParsePrices(DefaultPricesJSON)
	if err != nil {
		return fmt.Errorf("config: embedded price table: %w", err)
	}
	layers := []map[string]Model{base}
	var fileBytes []byte
	if c.PricesFile != "" {
		path := c.PricesFile
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		b, err := ReadFile(path, MaxFileBytes)
		if err != nil {
			return &Error{Problems: []string{fmt.Sprintf("prices_file: %v", err)}}
		}
		file, err := ParsePrices(b)
		if err != nil {
			return &Error{Problems: []string{fmt.Sprintf("prices_file: %v", err)}}
		}
		layers = append(layers, file)
		fileBytes = b
	}
	for name, keys := range c.priceKeys {
		for _, l := range layers {
			if _, ok := l[name]; ok {
				delete(c.priceKeys, name) // a lower layer prices the sides the entry leaves out
				break
			}
		}
		if slices.Contains(keys, "alias_of") {
			delete(c.priceKeys, name) // checkAlias reports an alias's own prices
		}
	}
	c.mergePrices(layers...)
	if err := c.loadImagePrices(fileBytes); err != nil {
		return &Error{Problems: []string{fmt.Sprintf("prices_file: %v", err)}}
	}
	return nil
}
