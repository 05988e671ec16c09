package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A prices_file may not price an image past MaxImageUSD: 1e308 USD per
// pixel (finite, so the per-pixel check let it through) summed to +Inf per
// image, which buildImagePrices turned into an int64 that reserved nothing:
// live, a 1-USD-a-day usd limit let DALL·E 3 images through with
// "reserved":0. A dear but honest price loads.
func TestImagePriceCapped(t *testing.T) {
	for _, tc := range []struct {
		name, perPixel, wantErr string
	}{
		{name: "infinite per image", perPixel: "1e308", wantErr: `"1024-x-1024/dall-e-3": +Inf USD per image`},
		{name: "past int64 micro-USD", perPixel: "1e7", wantErr: "more than 1e+06"},
		{name: "dear but priced", perPixel: "1e-3"},
	} {
		dir := t.TempDir()
		prices := `{"1024-x-1024/dall-e-3": {"input_cost_per_pixel": ` + tc.perPixel + `, "output_cost_per_pixel": ` + tc.perPixel + `, "mode": "image_generation"}}`
		if err := os.WriteFile(filepath.Join(dir, "p.json"), []byte(prices), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("prices_file: p.json\n"+minimalUpstream), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(filepath.Join(dir, "c.yaml"))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want it loaded", tc.name, err)
		case tc.wantErr == "" && cfg.ImagePrices[ImagePriceKey("dall-e-3", "", "1024x1024")] != 2*1024*1024*1e-3:
			t.Errorf("%s: priced %v USD per image, want %v", tc.name, cfg.ImagePrices[ImagePriceKey("dall-e-3", "", "1024x1024")], 2*1024*1024*1e-3)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
}
