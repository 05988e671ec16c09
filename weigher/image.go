package weigher

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	_ "image/jpeg" // registers JPEG for image.DecodeConfig
	_ "image/png"  // registers PNG for image.DecodeConfig
	"io"
	"math"
	"strings"
)

// Image token rules from OpenAI's "Images and vision" guide, section
// "Calculating costs" (https://platform.openai.com/docs/guides/images-vision?api-mode=chat#calculating-costs,
// now at https://developers.openai.com/api/docs/guides/images-vision).
//
// Tile-based models: "detail": "low" costs the base tokens. "high" scales the
// image to fit a 2048×2048 square, then so its shortest side is 768 px, counts
// the 512 px tiles covering it, and costs base + tiles × tile tokens. Worked
// examples for gpt-4o: 1024×1024 high = 765; 2048×4096 high = 1105; any size
// low = 85.
//
// Patch-based models: the number of 32×32 px patches covering the image,
// shrunk to fit a budget of 1536 patches, times a per-model multiplier.
// Worked examples: 1024×1024 = 1024 patches; 1800×2400 = 1452 patches.
const (
	tileMaxSide   = 2048 // px, the square a high-detail image is fitted into
	tileShortSide = 768  // px, the shortest side after the second scaling
	tileSide      = 512  // px, the side of one tile
	patchSide     = 32   // px, the side of one patch
	patchBudget   = 1536 // patches, the cap of the patch-based models
	// maxTiles is the most tiles any high-detail image can need: after the
	// two scalings the short side is ≤ 768 px (2 tiles) and the long side
	// ≤ 2048 px (4 tiles).
	maxTiles = 8
	// originalPatchCap is the most 32 px patches an image sent with
	// "detail": "original" is read as: newer models (gpt-5.4 and later)
	// read such an image at its full size, by 32×32 px patches, up to a
	// budget of 10,000 patches (the guide's "Model sizing behavior"
	// section, https://platform.openai.com/docs/guides/images-vision#model-sizing-behavior;
	// the same cap is what OpenAI's own Codex client estimates an
	// original-detail image by, openai/codex pull request 19865). One
	// token a patch is assumed (the guide's figure for a patch; a model
	// with a patch multiplier gets it too).
	originalPatchCap = 10_000
)

// imageRule is how one model family prices an image.
type imageRule struct {
	patch      bool  // patch-based; otherwise tile-based
	base, tile int64 // tokens, tile-based models
	multPct    int64 // patch-based multiplier × 100 (1.62 → 162)
}

// imageRules maps model-name prefixes to their rule, most specific first,
// from the tables of the guide cited above. Models matching none use
// defaultImageRule.
var imageRules = []struct {
	prefix string
	rule   imageRule
}{
	{"gpt-4o-mini", imageRule{base: 2833, tile: 5667}},
	{"gpt-4.1-mini", imageRule{patch: true, multPct: 162}},
	{"gpt-4.1-nano", imageRule{patch: true, multPct: 246}},
	{"gpt-5-mini", imageRule{patch: true, multPct: 162}},
	{"gpt-5-nano", imageRule{patch: true, multPct: 246}},
	{"gpt-5.4-mini", imageRule{patch: true, multPct: 162}},
	{"gpt-5.4-nano", imageRule{patch: true, multPct: 246}},
	{"o4-mini", imageRule{patch: true, multPct: 172}},
	{"gpt-5", imageRule{base: 70, tile: 140}},
	{"gpt-4o", imageRule{base: 85, tile: 170}},
	{"gpt-4.1", imageRule{base: 85, tile: 170}},
	{"gpt-4.5", imageRule{base: 85, tile: 170}},
	{"gpt-4", imageRule{base: 85, tile: 170}}, // gpt-4-turbo / vision-preview
	{"o1", imageRule{base: 75, tile: 150}},
	{"o3", imageRule{base: 75, tile: 150}},
	{"computer-use-preview", imageRule{base: 65, tile: 129}},
}

// defaultImageRule prices images for a model whose name matches none of
// imageRules (provider decorations stripped: canonicalModel) by the
// dearest rule of the table, gpt-4o-mini's (2833/5667): such a name may
// be any OpenAI model behind a gateway's own name, and the reservation
// must not be below what the upstream bills.
var defaultImageRule = imageRule{base: 2833, tile: 5667}

// imageRuleFor is model's image rule: the first of imageRules whose prefix
// its stripped name (canonicalModel) has, else defaultImageRule.
func imageRuleFor(model string) imageRule {
	model = canonicalModel(model)
	for _, r := range imageRules {
		if strings.HasPrefix(model, r.prefix) {
			return r.rule
		}
	}
	return defaultImageRule
}

// imageTokens is what one image costs model, in tokens. width and height are
// in pixels; 0 means unknown (a plain http(s) URL, or a data: URL whose
// header could not be read), and then the estimate is the maximum the rule
// allows: 8 tiles for a tile-based model at high detail (85 + 8 × 170 = 1445
// for gpt-4o; 2833 + 8 × 5667 = 48,169 for gpt-4o-mini and an unknown
// name), the full 1536-patch budget for a patch-based one. "high", "auto"
// and an absent detail are priced as "high", since "auto" lets the model
// choose; "low" as "low" (patch-based models ignore both). "original", and
// any other value (a detail level newer than this code, a value that is
// not a string), is priced as the larger of "high" and the image's 32 px
// patches at its full size (originalPatchCap of them when the size is
// unknown or larger), so that no detail level weighs less than "high".
//
// A Claude model behind an OpenAI-compatible endpoint ("anthropic/claude-…"
// on OpenRouter) is priced by Claude's rule (claudeImageTokens), whatever
// the detail.
func imageTokens(model, detail string, width, height int64) int64 {
	if isClaude(canonicalModel(model)) {
		return claudeImageTokens(model, width, height)
	}
	r := imageRuleFor(model)
	switch detail {
	case "low", "high", "auto", "":
	default:
		return max(imageTokens(model, "high", width, height), originalPatches(width, height)*max(100, r.multPct)/100)
	}
	known := width > 0 && height > 0
	if r.patch {
		p := int64(patchBudget)
		if known {
			p = patchCount(width, height)
		}
		return (p*r.multPct + 99) / 100
	}
	if detail == "low" {
		return r.base
	}
	t := int64(maxTiles)
	if known {
		t = tileCount(width, height)
	}
	return r.base + t*r.tile
}

// tileCount is the number of 512 px tiles of a high-detail image of
// width × height px, after fitting it in 2048×2048 and scaling its shortest
// side down to 768 px (integer pixels, truncated). Images already smaller
// are not scaled up, as in the guide's examples.
func tileCount(width, height int64) int64 {
	w, h := width, height
	if long := max(w, h); long > tileMaxSide {
		w, h = max(1, w*tileMaxSide/long), max(1, h*tileMaxSide/long)
	}
	if short := min(w, h); short > tileShortSide {
		w, h = w*tileShortSide/short, h*tileShortSide/short
	}
	return ceilDiv(w, tileSide) * ceilDiv(h, tileSide)
}

// patchCount is the number of 32 px patches of an image of width × height
// px, shrunk to the 1536-patch budget by the guide's formula.
func patchCount(width, height int64) int64 {
	p := ceilDiv(width, patchSide) * ceilDiv(height, patchSide)
	if p <= patchBudget {
		return p
	}
	w, h := float64(width), float64(height)
	shrink := math.Sqrt(patchSide * patchSide * patchBudget / (w * h))
	sw, sh := w*shrink/patchSide, h*shrink/patchSide
	adj := shrink * min(math.Floor(sw)/sw, math.Floor(sh)/sh)
	p = ceilDiv(int64(w*adj), patchSide) * ceilDiv(int64(h*adj), patchSide)
	if p <= 0 || p > patchBudget {
		return patchBudget
	}
	return p
}

// originalPatches is the number of 32 px patches covering an image of
// width × height px at its full size, at most originalPatchCap;
// originalPatchCap when the size is unknown (0).
func originalPatches(width, height int64) int64 {
	if width <= 0 || height <= 0 {
		return originalPatchCap
	}
	w, h := min(ceilDiv(width, patchSide), originalPatchCap), min(ceilDiv(height, patchSide), originalPatchCap)
	return min(w*h, originalPatchCap)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// dataURLSize reads the pixel size of a base64 data: URL image from its
// header only (see base64ImageSize). It returns 0, 0 when url is not such a
// data URL or its header cannot be read.
func dataURLSize(url string) (width, height int64) {
	if !strings.HasPrefix(url, "data:") {
		return 0, 0
	}
	i := strings.Index(url, ";base64,")
	if i < 0 {
		return 0, 0
	}
	return base64ImageSize(url[i+len(";base64,"):])
}

// base64ImageSize reads the pixel size of a base64-encoded image from its
// header only (PNG, JPEG through image.DecodeConfig; WebP and GIF, up to
// its first image descriptor, parsed here: gifSize),
// decoding no more base64 than the header needs. It returns 0, 0 when the
// header cannot be read.
func base64ImageSize(data string) (width, height int64) {
	dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))
	var head [30]byte
	n, _ := io.ReadFull(dec, head[:])
	if w, h, ok := webpSize(head[:n]); ok {
		return w, h
	}
	if n >= 4 && string(head[:4]) == "GIF8" {
		if w, h, ok := gifSize(io.MultiReader(bytes.NewReader(head[:n]), dec)); ok && w > 0 && h > 0 {
			return w, h
		}
		return 0, 0
	}
	cfg, _, err := image.DecodeConfig(io.MultiReader(bytes.NewReader(head[:n]), dec))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0
	}
	return int64(cfg.Width), int64(cfg.Height)
}

// webpSize reads the canvas size from the first 30 bytes of a WebP file
// (RIFF container; VP8, VP8L or VP8X first chunk, per
// https://developers.google.com/speed/webp/docs/riff_container).
func webpSize(b []byte) (width, height int64, ok bool) {
	if len(b) < 30 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	switch string(b[12:16]) {
	case "VP8 ": // lossy: key frame start code 9d 01 2a, then 14-bit sizes
		if b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a {
			return 0, 0, false
		}
		width = int64(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff)
		height = int64(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff)
	case "VP8L": // lossless: signature 0x2f, then 14-bit width-1, height-1
		if b[20] != 0x2f {
			return 0, 0, false
		}
		bits := binary.LittleEndian.Uint32(b[21:25])
		width = int64(bits&0x3fff) + 1
		height = int64(bits>>14&0x3fff) + 1
	case "VP8X": // extended: 24-bit canvas width-1, height-1
		width = int64(uint32(b[24])|uint32(b[25])<<8|uint32(b[26])<<16) + 1
		height = int64(uint32(b[27])|uint32(b[28])<<8|uint32(b[29])<<16) + 1
	default:
		return 0, 0, false
	}
	return width, height, width > 0 && height > 0
}
