package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestStackedDecoderMemory: decoder undoes a stack of codings last applied
// first, each stage's window taken from the one answer budget: "zstd,
// zstd" with two 4 MiB windows holds both while it decodes and reads the
// answer whole when the budget has room for both; with room for one only
// it is refused (errWindowBudget) and holds nothing, the first stage's
// window given back; four codings are refused before any is read.
func TestStackedDecoderMemory(t *testing.T) {
	answer := []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":6000}}`)
	inner := zstdFrame(12, answer, 0, 0, true) // 4 MiB window
	coded := zstdFrame(12, inner, 0, 0, true)
	const window = 4 << 20
	for _, tc := range []struct {
		name   string
		budget int64
		enc    string
		body   []byte
		err    error // nil: read whole
	}{
		{"room for both windows", 16 << 20, "zstd, zstd", coded, nil},
		{"room for one window", 6 << 20, "zstd, zstd", coded, errWindowBudget},
		{"four codings", 16 << 20, "gzip, gzip, gzip, gzip", coded, errTooManyCodings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t), answerBudget: tc.budget})
			mem := decoderMemory{p: r.px}
			d, err := decoder(tc.enc, bytes.NewReader(tc.body), &mem)
			if !errors.Is(err, tc.err) {
				t.Fatalf("decoder: %v, want %v", err, tc.err)
			}
			if err != nil {
				if held := r.px.ResponseBytesHeld(); held != 0 {
					t.Errorf("%d bytes held by a refused stack", held)
				}
				return
			}
			if held := r.px.ResponseBytesHeld(); held < 2*window {
				t.Errorf("%d bytes held while two 4 MiB windows decode", held)
			}
			got, err := io.ReadAll(d)
			if err != nil || !bytes.Equal(got, answer) {
				t.Errorf("decoded %q, %v; want %q", got, err, answer)
			}
			mem.release()
			if held := r.px.ResponseBytesHeld(); held != 0 {
				t.Errorf("%d bytes held after release", held)
			}
		})
	}
}

// FuzzStackedDecoder: any Content-Encoding list and body: decoder never
// panics, reads at most what it is read for, and once its memory is given
// back the answer budget holds nothing.
func FuzzStackedDecoder(f *testing.F) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"usage":{}}`))
	zw.Close()
	twice := new(bytes.Buffer)
	zw = gzip.NewWriter(twice)
	zw.Write(gz.Bytes())
	zw.Close()
	f.Add("gzip, gzip", twice.Bytes())
	f.Add("gzip,,identity , deflate", gz.Bytes())
	f.Add("zstd, br", zstdFrame(12, []byte("x"), 0, 0, true))
	f.Add(" , ,", []byte("x"))
	f.Add("br, br, br, br", []byte{0x0b})
	px := &Proxy{} // decoder needs only the answer budget (nil metrics count nothing)
	px.answers.max = 64 << 20
	f.Fuzz(func(t *testing.T, enc string, body []byte) {
		if len(enc) > 256 {
			return
		}
		mem := decoderMemory{p: px}
		if d, err := decoder(strings.ToLower(enc), bytes.NewReader(body), &mem); err == nil {
			io.Copy(io.Discard, io.LimitReader(d, 1<<20))
		}
		mem.release()
		if held := px.ResponseBytesHeld(); held != 0 {
			t.Fatalf("%d bytes held after release", held)
		}
	})
}
