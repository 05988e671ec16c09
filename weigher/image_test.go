package weigher

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

func TestImageTokensPublishedExamples(t *testing.T) {
	// Worked examples of https://platform.openai.com/docs/guides/images-vision?api-mode=chat#calculating-costs.
	for _, tc := range []struct {
		name, model, detail string
		w, h                int64
		want                int64
	}{
		{"gpt-4o 1024×1024 high", "gpt-4o", "high", 1024, 1024, 765},
		{"gpt-4o 2048×4096 high", "gpt-4o", "high", 2048, 4096, 1105},
		{"gpt-4o 4096×8192 low", "gpt-4o", "low", 4096, 8192, 85},
		// The guide's per-model base/tile table applied to the 1024×1024 case.
		{"gpt-4o-mini 1024×1024 high", "gpt-4o-mini", "high", 1024, 1024, 2833 + 4*5667},
		{"gpt-4o-mini low", "gpt-4o-mini-2024-07-18", "low", 4096, 8192, 2833},
		{"gpt-5 1024×1024 high", "gpt-5", "high", 1024, 1024, 70 + 4*140},
		{"o3 low", "o3", "low", 100, 100, 75},
		{"o1 2048×4096 high", "o1", "high", 2048, 4096, 75 + 6*150},
		{"gpt-4.1 auto counts as high", "gpt-4.1", "auto", 1024, 1024, 765},
		// A name matching no family is priced by the dearest rule, gpt-4o-mini's.
		{"unknown model uses the dearest rule", "llava", "", 1024, 1024, 2833 + 4*5667},
		{"provider-prefixed name", "openai/gpt-4o-mini", "low", 100, 100, 2833},
		{"fine-tuned name", "ft:gpt-4o-mini-2024-07-18:org::abc", "low", 100, 100, 2833},
		{"small image is not scaled up", "gpt-4o", "high", 500, 500, 85 + 170},
		{"unknown size: 8 tiles", "gpt-4o", "high", 0, 0, 85 + 8*170},
		{"unknown size, low", "gpt-4o", "low", 0, 0, 85},
		// Patch-based: 1024×1024 = 1024 patches, 1800×2400 = 1452 patches.
		{"gpt-4.1-mini 1024×1024", "gpt-4.1-mini", "", 1024, 1024, (1024*162 + 99) / 100},
		{"gpt-4.1-nano 1800×2400", "gpt-4.1-nano-2025-04-14", "high", 1800, 2400, (1452*246 + 99) / 100},
		{"o4-mini 1800×2400", "o4-mini", "low", 1800, 2400, (1452*172 + 99) / 100},
		{"gpt-5-mini unknown size: full budget", "gpt-5-mini", "", 0, 0, (1536*162 + 99) / 100},
	} {
		if got := imageTokens(tc.model, tc.detail, tc.w, tc.h); got != tc.want {
			t.Errorf("%s: imageTokens = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPatchCount(t *testing.T) {
	for _, tc := range []struct{ w, h, want int64 }{
		{1024, 1024, 1024},
		{1800, 2400, 1452},
		{1, 1, 1},
		{10, 1_000_000, patchBudget}, // degenerate aspect: capped at the budget
		{1 << 31, 1 << 31, 1024 * 1536 / 1024},
	} {
		if got := patchCount(tc.w, tc.h); got != tc.want && !(tc.w == 1<<31 && got <= patchBudget && got > 0) {
			t.Errorf("patchCount(%d, %d) = %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
}

func TestTileCountNeverExceedsMax(t *testing.T) {
	for w := int64(1); w <= 5000; w += 37 {
		for h := int64(1); h <= 5000; h += 41 {
			if got := tileCount(w, h); got < 1 || got > maxTiles {
				t.Fatalf("tileCount(%d, %d) = %d, want 1..%d", w, h, got, maxTiles)
			}
		}
	}
}

func encodeDataURL(t *testing.T, mime string, img []byte) string {
	t.Helper()
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img)
}

func pngDataURL(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return encodeDataURL(t, "image/png", b.Bytes())
}

func TestDataURLSize(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 300, 200))
	var j, g bytes.Buffer
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	// Minimal WebP headers (RIFF + first chunk), per
	// https://developers.google.com/speed/webp/docs/riff_container.
	vp8x := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00"), 0x2b, 0x01, 0x00, 0xc7, 0x00, 0x00) // 300×200
	vp8l := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f"), le32(299|199<<14)...)
	vp8l = append(vp8l, 0, 0, 0, 0, 0) // pad to the 30 bytes read
	vp8 := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x9d\x01\x2a"), 0x2c, 0x01, 0xc8, 0x00)
	for _, tc := range []struct {
		name, url string
		w, h      int64
	}{
		{"png", pngDataURL(t, 1024, 768), 1024, 768},
		{"jpeg", encodeDataURL(t, "image/jpeg", j.Bytes()), 300, 200},
		{"gif", encodeDataURL(t, "image/gif", g.Bytes()), 300, 200},
		{"webp VP8X", encodeDataURL(t, "image/webp", vp8x), 300, 200},
		{"webp VP8L", encodeDataURL(t, "image/webp", vp8l), 300, 200},
		{"webp VP8", encodeDataURL(t, "image/webp", vp8), 300, 200},
		{"http URL", "https://example.com/cat.png", 0, 0},
		{"not base64", "data:image/png,rawbytes", 0, 0},
		{"garbage base64", "data:image/png;base64,!!!!", 0, 0},
		{"truncated png", pngDataURL(t, 10, 10)[:40], 0, 0},
	} {
		w, h := dataURLSize(tc.url)
		if w != tc.w || h != tc.h {
			t.Errorf("%s: dataURLSize = %d×%d, want %d×%d", tc.name, w, h, tc.w, tc.h)
		}
	}
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
