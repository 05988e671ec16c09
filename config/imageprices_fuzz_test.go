package config

import (
	"math"
	"testing"
)

// ParseImagePrices never panics, and every per-image price it returns is a
// finite number in [0, MaxImageUSD].
func FuzzParseImagePrices(f *testing.F) {
	for _, s := range []string{
		`{"1024-x-1024/dall-e-3": {"input_cost_per_pixel": 3.81469e-08, "output_cost_per_pixel": 0.0}}`,
		`{"hd/1024-x-1792/dall-e-3": {"input_cost_per_pixel": 6.539e-08}}`,
		`{"1024-x-1024/m": {"input_cost_per_pixel": 1e308, "output_cost_per_pixel": 1e308}}`,
		`{"99999-x-99999/m": {"input_cost_per_pixel": 1e-4}}`, `{"1024-x-1024/m": 1}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ParseImagePrices(b)
		if err != nil {
			return
		}
		for k, v := range ps {
			if !(v >= 0 && v <= MaxImageUSD) || math.IsNaN(v) {
				t.Fatalf("%q: %v USD per image", k, v)
			}
		}
	})
}
