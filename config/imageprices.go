package config

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// imagePriceKey matches a LiteLLM-format entry of a model billed per image
// (model_prices_and_context_window.json's image_generation entries):
// "[quality/]W-x-H/model", e.g. "hd/1024-x-1792/dall-e-3", "256-x-256/dall-e-2".
var imagePriceKey = regexp.MustCompile(`^(?:([a-z]+)/)?([0-9]{2,5})-x-([0-9]{2,5})/([A-Za-z0-9._-]+)$`)

// ImagePriceKey is the key of Config.ImagePrices for a model's image of
// size ("WxH") in quality ("" when the model has none).
func ImagePriceKey(model, quality, size string) string { return model + "|" + quality + "|" + size }

// MaxImageUSD is the dearest image a price file may price, in USD: a
// million dollars, as text prices stop at 1,000,000 USD per million
// tokens. Past it a price would not fit llmguard's int64 micro-USD (an
// image at 1e308 USD per pixel, +Inf, was priced 0 and reserved nothing
// under a usd limit).
const MaxImageUSD = 1_000_000

// ParseImagePrices reads the per-image prices of a LiteLLM-format price
// file: for each "[quality/]W-x-H/model" entry, W × H × (input_cost_per_pixel
// + output_cost_per_pixel) in USD per image, keyed by ImagePriceKey. Other
// entries are ignored. Errors: invalid JSON, a negative or non-finite price,
// an image dearer than MaxImageUSD.
func ParseImagePrices(b []byte) (map[string]float64, error) {
	if err := jsonscan.Check(b, jsonscan.Options{}); err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	var raw map[string]struct {
		In  *float64 `json:"input_cost_per_pixel"`
		Out *float64 `json:"output_cost_per_pixel"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil // not an object of objects: ParsePrices reports it
	}
	out := map[string]float64{}
	for key, e := range raw {
		m := imagePriceKey.FindStringSubmatch(key)
		if m == nil || e.In == nil && e.Out == nil {
			continue
		}
		var perPixel float64
		for _, v := range []*float64{e.In, e.Out} {
			if v == nil {
				continue
			}
			if *v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0) {
				return nil, fmt.Errorf("prices: %q: negative or non-finite price %v", key, *v)
			}
			perPixel += *v
		}
		w, _ := strconv.ParseFloat(m[2], 64)
		h, _ := strconv.ParseFloat(m[3], 64)
		perImage := w * h * perPixel
		if !(perImage <= MaxImageUSD) { // !(<=) also refuses +Inf (1e308 + 1e308 per pixel)
			return nil, fmt.Errorf("prices: %q: %v USD per image (%s × %s pixels at %v USD each) is more than %v", key, perImage, m[2], m[3], perPixel, float64(MaxImageUSD))
		}
		out[ImagePriceKey(m[4], m[1], m[2]+"x"+m[3])] = perImage
	}
	return out, nil
}

// loadImagePrices reads the per-image prices of the embedded table and
// then of prices (the prices_file's bytes, nil when none), the file's
// taking precedence.
func (c *Config) loadImagePrices(file []byte) error {
	c.ImagePrices = map[string]float64{}
	for _, b := range [][]byte{DefaultPricesJSON, file} {
		if b == nil {
			continue
		}
		ps, err := ParseImagePrices(b)
		if err != nil {
			return err
		}
		for k, v := range ps {
			c.ImagePrices[k] = v
		}
	}
	return nil
}
