package contentcoding

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"
)

// Encode applies c to b (a test helper, with each format's usual writer).
func Encode(tb testing.TB, c Coding, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch c {
	case Gzip:
		w = gzip.NewWriter(&buf)
	case Deflate:
		w = zlib.NewWriter(&buf)
	case Brotli:
		bw, err := brotli.NewWriter(&buf, 5)
		if err != nil {
			tb.Fatal(err)
		}
		w = bw
	case Zstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tb.Fatal(err)
		}
		w = zw
	default:
		return append([]byte(nil), b...)
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// budget is a memory budget that records what is held.
type budget struct{ held, cap int }

func (b *budget) hold(n int) bool {
	if b.held+n > b.cap {
		return false
	}
	b.held += n
	return true
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []Coding
		err  error
	}{
		{nil, nil, nil},
		{[]string{"gzip"}, []Coding{Gzip}, nil},
		{[]string{" GZip "}, []Coding{Gzip}, nil},
		{[]string{"x-gzip"}, []Coding{Gzip}, nil},
		{[]string{"identity"}, nil, nil},
		{[]string{"deflate, br"}, []Coding{Deflate, Brotli}, nil},
		{[]string{"zstd", "identity, gzip"}, []Coding{Zstd, Gzip}, nil},
		{[]string{"gzip,,br,"}, []Coding{Gzip, Brotli}, nil},
		{[]string{"compress"}, nil, ErrUnsupported},
		{[]string{"gzip, lzma"}, nil, ErrUnsupported},
		{[]string{"gzip;q=1"}, nil, ErrUnsupported},
		{[]string{"gzip,gzip,gzip,gzip,gzip"}, nil, ErrUnsupported},
	} {
		var vals [][]byte
		for _, v := range tc.in {
			vals = append(vals, []byte(v))
		}
		got, err := Parse(vals)
		if !errors.Is(err, tc.err) || !equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func equal(a, b []Coding) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRoundTrip: each coding, and codings stacked, decode to the bytes
// encoded, whatever the size up to the limit; one byte more is too large.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := []byte(strings.Repeat(`{"role":"user","content":"the quick brown fox"},`, 3000))
	noise := make([]byte, 200<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for _, plain := range [][]byte{nil, []byte("{}"), text, noise} {
		for _, cs := range [][]Coding{{Gzip}, {Deflate}, {Brotli}, {Zstd}, {Gzip, Brotli}, {Zstd, Deflate, Gzip}, {Identity, Gzip}} {
			enc := plain
			for _, c := range cs {
				enc = Encode(t, c, enc)
			}
			b := &budget{cap: 1 << 30}
			got, err := Decode(enc, cs, Options{Limit: len(plain) + 64, Hold: b.hold}) // room for inner stages' headers
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%v of %d bytes: %d bytes, %v", cs, len(plain), len(got), err)
			}
			if len(plain) > 64 {
				_, err = Decode(enc, cs, Options{Limit: len(plain) - 1})
				if !errors.Is(err, ErrTooLarge) {
					t.Errorf("%v of %d bytes with a limit one short: %v", cs, len(plain), err)
				}
			}
		}
	}
	// Raw deflate, without the zlib wrapper.
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, 5)
	fw.Write(text)
	fw.Close()
	if got, err := Decode(raw.Bytes(), []Coding{Deflate}, Options{Limit: len(text)}); err != nil || !bytes.Equal(got, text) {
		t.Errorf("raw deflate: %d bytes, %v", len(got), err)
	}
	// Identity alone: a copy.
	in := []byte("{}")
	if got, err := Decode(in, nil, Options{Limit: 10}); err != nil || &got[0] == &in[0] {
		t.Errorf("identity: %q %v (aliases: %v)", got, err, &got[0] == &in[0])
	}
}

// TestCorrupt: data that is not valid in its coding, cut short, or
// followed by more data is ErrCorrupt.
func TestCorrupt(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[]}`)
	for _, c := range []Coding{Gzip, Deflate, Brotli, Zstd} {
		enc := Encode(t, c, body)
		for name, bad := range map[string][]byte{
			"not encoded":   body,
			"cut":           enc[:len(enc)-3],
			"trailing":      append(append([]byte{}, enc...), "x"...),
			"trailing JSON": append(append([]byte{}, enc...), `{"max_tokens":100000}`...),
			"empty":         nil,
		} {
			if c == Deflate && name == "not encoded" {
				continue // raw deflate reads some bytes as stored blocks; checked by the fuzzer instead
			}
			if _, err := Decode(bad, []Coding{c}, Options{Limit: 1 << 20}); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v %s: %v, want ErrCorrupt", c, name, err)
			}
		}
	}
}

// TestBombs: 1 GiB of zeros compressed (about a megabyte or less) stops at
// the limit, having held no more than the limit and the decoder's window
// and state.
func TestBombs(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, 64<<20) // 64 MiB of zeros, encoded once per coding
	for _, c := range []Coding{Gzip, Deflate, Brotli, Zstd} {
		bomb := Encode(t, c, zeros)
		t.Logf("%v: %d MiB of zeros in %d KiB", c, len(zeros)>>20, len(bomb)>>10)
		b := &budget{cap: 1 << 30}
		_, err := Decode(bomb, []Coding{c}, Options{Limit: limit, Hold: b.hold})
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v bomb: %v, want ErrTooLarge", c, err)
		}
		if most := limit + MaxWindow + ZstdStateBytes; b.held > most {
			t.Errorf("%v bomb held %d bytes, more than %d", c, b.held, most)
		}
		// A bomb nested in a bomb stops at the first stage's limit.
		nested := Encode(t, Gzip, bomb[:min(len(bomb), limit/2)])
		if _, err := Decode(nested, []Coding{c, Gzip}, Options{Limit: limit}); err == nil {
			t.Errorf("%v nested bomb decoded", c)
		}
	}
}

// TestBudget: a decoding the budget cannot hold is ErrBudget, and what was
// held before the refusal stays counted (the caller releases it).
func TestBudget(t *testing.T) {
	text := bytes.Repeat([]byte("abcdefgh"), 64<<10) // 512 KiB
	for _, c := range []Coding{Gzip, Deflate, Brotli, Zstd} {
		enc := Encode(t, c, text)
		b := &budget{cap: 200 << 10}
		if _, err := Decode(enc, []Coding{c}, Options{Limit: 1 << 20, Hold: b.hold}); !errors.Is(err, ErrBudget) {
			t.Errorf("%v: %v, want ErrBudget", c, err)
		}
		if b.held > b.cap {
			t.Errorf("%v: held %d past the budget %d", c, b.held, b.cap)
		}
	}
}

func TestWindows(t *testing.T) {
	// Brotli: WBITS from the stream's first bits (RFC 7932 §9.1).
	for _, tc := range []struct {
		b    []byte
		want int
		ok   bool
	}{
		{[]byte{0x00}, 1 << 16, true},
		{[]byte{0x0b}, 1 << 22, true}, // 1, 101: 17+5
		{[]byte{0x0f}, 1 << 24, true},
		{[]byte{0x21}, 1 << 10, true}, // 1, 000, 010: 8+2
		{[]byte{0x01}, 1 << 17, true}, // 1, 000, 000
		{[]byte{0x11}, 0, false},      // large window
		{nil, 0, false},
	} {
		if got, ok := brotliWindow(tc.b); got != tc.want || ok != tc.ok {
			t.Errorf("brotliWindow(%x) = %d, %v; want %d, %v", tc.b, got, ok, tc.want, tc.ok)
		}
	}
	for _, size := range []int{10, 5000, 3 << 20} {
		enc := Encode(t, Brotli, make([]byte, size))
		w, ok := brotliWindow(enc)
		if !ok || w < min(size, 1<<16) || w > MaxWindow {
			t.Errorf("brotli window of %d bytes: %d %v", size, w, ok)
		}
	}
	// zstd: a frame (RFC 8878 §3.1.1) with no content size, a window
	// descriptor, and one raw last block holding "{}".
	frame := func(descriptor byte) []byte {
		return []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, descriptor, 2<<3 | 1, 0, 0, '{', '}'}
	}
	b := &budget{cap: 1 << 30}
	if got, err := Decode(frame(10<<3), []Coding{Zstd}, Options{Limit: 10, Hold: b.hold}); err != nil || string(got) != "{}" || b.held < 1<<20 {
		t.Errorf("zstd with a 1 MiB window: %q %v, held %d", got, err, b.held)
	}
	if _, err := Decode(frame(15<<3), []Coding{Zstd}, Options{Limit: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("zstd with a 32 MiB window: %v", err)
	}
	if w, err := ZstdWindow(frame(13<<3 | 4)); w != 8<<20+4<<20 || err != nil { // 2^23 + 4/8 of it
		t.Errorf("zstd window 13/4: %d %v", w, err)
	}
	// A skippable frame first is passed over.
	skip := append([]byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'}, Encode(t, Zstd, []byte("{}"))...)
	if got, err := Decode(skip, []Coding{Zstd}, Options{Limit: 10}); err != nil || string(got) != "{}" {
		t.Errorf("skippable frame: %q %v", got, err)
	}
}

// FuzzDecode: any input, in any coding, decodes within the limit and the
// budget or fails with one of the errors; it never panics.
func FuzzDecode(f *testing.F) {
	for _, c := range []Coding{Gzip, Deflate, Brotli, Zstd} {
		f.Add(Encode(f, c, []byte(`{"model":"gpt-4o","messages":[]}`)), uint8(c), uint16(100))
		f.Add(Encode(f, c, make([]byte, 5000)), uint8(c), uint16(1000))
	}
	f.Add([]byte("not encoded"), uint8(Gzip), uint16(10))
	f.Fuzz(func(t *testing.T, data []byte, c uint8, limit uint16) {
		lim := int(limit) + 1
		b := &budget{cap: 64 << 20}
		coding := Coding(c % uint8(numCodings+1))
		out, err := Decode(data, []Coding{coding}, Options{Limit: lim, Hold: b.hold})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrBudget) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%v: unexpected error %v", coding, err)
			}
			return
		}
		if coding != Identity && len(out) > lim {
			t.Fatalf("%v: %d bytes past the limit %d", coding, len(out), lim)
		}
		if b.held > b.cap {
			t.Fatalf("held %d past the budget", b.held)
		}
	})
}
