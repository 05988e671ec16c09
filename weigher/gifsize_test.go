package weigher

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// gifOf encodes a w x h GIF whose logical screen is then set to sw x sh
// (the frame unchanged), with a comment extension before the frame.
func gifOf(t testing.TB, w, h, sw, sh int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := gif.Encode(&buf, image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White}), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[6], b[7], b[8], b[9] = byte(sw), byte(sw>>8), byte(sh), byte(sh>>8)
	// A comment extension (0x21 0xfe, two sub-blocks) before the first
	// image descriptor, after the global colour table (2 colours: 6 bytes).
	at := 13 + 6
	comment := []byte{0x21, 0xfe, 3, 'a', 'b', 'c', 1, 'd', 0}
	return append(append(append([]byte(nil), b[:at]...), comment...), b[at:]...)
}

// TestGIFSizedByFirstFrame: a GIF's size is its logical screen grown to
// its first frame's extent, as Pillow reads it, so a 2048x2048 frame on a
// 1x1 screen weighs as much as the same frame on a true screen, under
// every image rule (OpenAI tiles, Claude's pixels).
func TestGIFSizedByFirstFrame(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	for _, c := range []struct{ w, h, sw, sh, ww, wh int64 }{
		{2048, 2048, 1, 1, 2048, 2048},
		{300, 200, 500, 100, 500, 200},
		{64, 64, 64, 64, 64, 64},
		{100, 50, 0, 0, 100, 50},
	} {
		b := gifOf(t, int(c.w), int(c.h), int(c.sw), int(c.sh))
		if w, h := base64ImageSize(base64.StdEncoding.EncodeToString(b)); w != c.ww || h != c.wh {
			t.Errorf("%dx%d frame on a %dx%d screen: size %dx%d, want %dx%d", c.w, c.h, c.sw, c.sh, w, h, c.ww, c.wh)
		}
	}
	honest, lying := gifOf(t, 2048, 2048, 2048, 2048), gifOf(t, 2048, 2048, 1, 1)
	w := testWeigher(t)
	for _, c := range []struct{ name, body string }{
		{"gpt-4o chat", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/gif;base64,%s","detail":"high"}}]}]}`},
		{"claude messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"%s"}}]}]}`},
		{"gpt-4o responses", `{"model":"gpt-4o","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/gif;base64,%s","detail":"high"}]}]}`},
	} {
		weigh := func(b []byte) int64 {
			body := []byte(strings.Replace(c.body, "%s", base64.StdEncoding.EncodeToString(b), 1))
			switch c.name {
			case "claude messages":
				return w.Messages(body).InputTokens
			case "gpt-4o responses":
				return w.Responses(body).InputTokens
			}
			return w.Chat(body).InputTokens
		}
		if h, l := weigh(honest), weigh(lying); l < h || h < 100 {
			t.Errorf("%s: a 2048x2048 frame weighs %d on a 1x1 screen, %d on a true one", c.name, l, h)
		}
	}
}

// FuzzGIFSize: gifSize never panics, and on a GIF image.DecodeConfig
// reads it is never smaller than the logical screen DecodeConfig gives.
func FuzzGIFSize(f *testing.F) {
	f.Add(gifOf(f, 20, 10, 1, 1))
	f.Add(gifOf(f, 3, 3, 300, 2))
	f.Add([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, ok := gifSize(bytes.NewReader(b))
		if !ok {
			return
		}
		if cfg, err := gif.DecodeConfig(bytes.NewReader(b)); err == nil && (w < int64(cfg.Width) || h < int64(cfg.Height)) {
			t.Fatalf("size %dx%d, smaller than the screen %dx%d", w, h, cfg.Width, cfg.Height)
		}
	})
}
