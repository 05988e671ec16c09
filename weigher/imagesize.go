package weigher

import (
	"strconv"
	"strings"
)

// unlistedImageTokens are the image output tokens reserved for one image
// of a size imageOutputTokens lacks: GPT Image models newer than the table
// take any size in multiples of 16 up to 3840x2160 (gpt-image-2, per
// OpenAI's image generation guide) and bill image tokens that grow with
// the pixels. A "<width>x<height>" size (any case) is reserved at the
// table's largest tokens per pixel (1024x1024 at high quality, whatever
// the quality asked) times its pixels, rounded up; any size, and any other
// value ("auto", absent), at least maxImageOutputTokens.
func unlistedImageTokens(size string) int64 {
	w, h, ok := parseImageSize(size)
	if !ok {
		return maxImageOutputTokens
	}
	rt, rp := maxImageRate.tokens, maxImageRate.pixels
	px := w * h
	if px > maxTokens/rt {
		return maxTokens
	}
	return max(ceilDiv(px*rt, rp), maxImageOutputTokens)
}

// maxImageRate is imageOutputTokens' largest tokens per pixel, as the
// fraction tokens / pixels of its entry: found once, as the table is
// immutable.
var maxImageRate = func() (r struct{ tokens, pixels int64 }) {
	r.pixels = 1
	for s, byQuality := range imageOutputTokens {
		sw, sh, _ := parseImageSize(s)
		for _, t := range byQuality {
			if t*r.pixels > r.tokens*(sw*sh) {
				r.tokens, r.pixels = t, sw*sh
			}
		}
	}
	return r
}()

// parseImageSize reads a "<width>x<height>" size (x in any case), each
// side 1 to 999,999 pixels in decimal digits; ok is false otherwise.
func parseImageSize(size string) (width, height int64, ok bool) {
	ws, hs, found := strings.Cut(strings.ToLower(size), "x")
	if !found {
		return 0, 0, false
	}
	side := func(s string) (int64, bool) {
		if len(s) == 0 || len(s) > 6 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n > 0
	}
	width, okW := side(ws)
	height, okH := side(hs)
	return width, height, okW && okH
}
