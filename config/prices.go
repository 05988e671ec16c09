package config

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// DefaultPricesJSON is llmguard's shipped price table (config/prices.json),
// in the format of LiteLLM's public model_prices_and_context_window.json:
// USD per token per model. Its "llmguard_price_table" entry gives the date
// and the source. It is the base layer of every config's prices.
//
//go:embed prices.json
var DefaultPricesJSON []byte

// litellmPrice is one model entry of a LiteLLM-format price file. Fields
// are USD per token; other fields of the format are ignored.
type litellmPrice struct {
	Input        *float64 `json:"input_cost_per_token"`
	Output       *float64 `json:"output_cost_per_token"`
	CacheRead    *float64 `json:"cache_read_input_token_cost"`
	CacheWrite   *float64 `json:"cache_creation_input_token_cost"`
	CacheWrite1h *float64 `json:"cache_creation_input_token_cost_above_1hr"`
	// MaxInputTokens is the model's largest input, in tokens.
	MaxInputTokens *int64 `json:"max_input_tokens"`
}

// ParsePrices reads a LiteLLM-format price file into models with prices in
// USD per million tokens (per-token cost × 10^6). Entries without
// input_cost_per_token (metadata, image or audio models) are skipped.
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
		var p litellmPrice
		if err := json.Unmarshal(entry, &p); err != nil || p.Input == nil {
			continue
		}
		var m Model
		for _, f := range []struct {
			src *float64
			dst *float64
		}{{p.Input, &m.InputUSDPerMTok}, {p.Output, &m.OutputUSDPerMTok}, {p.CacheRead, &m.CachedInputUSDPerMTok},
			{p.CacheWrite, &m.CacheWriteUSDPerMTok}, {p.CacheWrite1h, &m.CacheWrite1hUSDPerMTok}} {
			if f.src == nil {
				continue
			}
			if *f.src < 0 || math.IsNaN(*f.src) || math.IsInf(*f.src, 0) {
				return nil, fmt.Errorf("prices: model %q: negative or non-finite price %v", name, *f.src)
			}
			// USD per token → USD per million tokens, kept to the pico-USD
			// per token llmguard prices in (1e-07 × 1e6 is 0.09999…).
			*f.dst = math.Round(*f.src*1e12) / 1e6
		}
		if p.MaxInputTokens != nil {
			if *p.MaxInputTokens < 0 {
				return nil, fmt.Errorf("prices: model %q: negative max_input_tokens %d", name, *p.MaxInputTokens)
			}
			m.MaxInputTokens = *p.MaxInputTokens
		}
		out[name] = m
	}
	return out, nil
}

// mergePrices fills c.Models from the price layers, lowest first: a model
// absent from c.Models is added with the layer's prices; a model present
// keeps every price it sets and takes the unset (zero) ones from the layer.
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
		if m.MaxInputTokens == 0 {
			m.MaxInputTokens = p.MaxInputTokens
		}
		c.Models[name] = m
	}
}

// loadPrices reads the embedded table and c.PricesFile (relative to dir)
// and merges them under c.Models.
func (c *Config) loadPrices(dir string) error {
	base, err := ParsePrices(DefaultPricesJSON)
	if err != nil {
		return fmt.Errorf("config: embedded price table: %w", err)
	}
	layers := []map[string]Model{base}
	if c.PricesFile != "" {
		path := c.PricesFile
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return &Error{Problems: []string{fmt.Sprintf("prices_file: %v", err)}}
		}
		file, err := ParsePrices(b)
		if err != nil {
			return &Error{Problems: []string{fmt.Sprintf("prices_file: %v", err)}}
		}
		layers = append(layers, file)
	}
	c.mergePrices(layers...)
	return nil
}
