// Package contentcoding undoes the content codings of a request body
// (RFC 9110 §8.4: gzip, deflate, br, zstd) within a size limit and a
// memory budget.
//
// In the request flow the proxy reads a body whole, within max_body_bytes;
// when it comes with Content-Encoding and goes to an endpoint llmguard
// weighs, [Decode] turns it into the bytes the upstream would read, again
// within max_body_bytes, taking every byte it allocates (the decoded output
// as it grows, and the decoder's window) from the proxy's in-flight budget
// before allocating it. The proxy weighs the decoded body and forwards it
// decoded, so the upstream reads exactly what was weighed. A decompression
// bomb stops at the limit having held no more than it; a coding llmguard
// does not know is refused before anything is read.
package contentcoding

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"
)

// Coding is one content coding. The zero value is no coding (identity).
type Coding uint8

const (
	// Identity: no coding (RFC 9110 §8.4.1; Parse drops it).
	Identity Coding = iota
	// Gzip: the gzip format (RFC 1952), every member of a multi-member
	// stream; "x-gzip" is the same (RFC 9110 §8.4.1.3).
	Gzip
	// Deflate: the zlib format (RFC 1950) holding deflate data (RFC 1951),
	// as RFC 9110 §8.4.1.2 defines it; raw deflate data without the zlib
	// wrapper, which some clients send, is read too.
	Deflate
	// Brotli: "br", the Brotli format (RFC 7932).
	Brotli
	// Zstd: the Zstandard format (RFC 8878).
	Zstd

	numCodings
)

// names are the codings' tokens in Content-Encoding, indexed by Coding.
var names = [numCodings]string{Identity: "identity", Gzip: "gzip", Deflate: "deflate", Brotli: "br", Zstd: "zstd"}

// String is c's Content-Encoding token ("gzip", "deflate", "br", "zstd",
// "identity").
func (c Coding) String() string {
	if c < numCodings {
		return names[c]
	}
	return "unknown"
}

// MaxCodings is the most codings a body may carry (identity not counted):
// nobody stacks more, and each stage holds up to the limit.
const MaxCodings = 4

// Errors Decode and Parse return, wrapped with the coding and the cause;
// test with errors.Is.
var (
	// ErrUnsupported: a coding llmguard does not decode, or more than
	// MaxCodings (the proxy answers 415).
	ErrUnsupported = errors.New("unsupported content coding")
	// ErrTooLarge: a stage's output passes Options.Limit, or the data asks
	// for a decoder window larger than [MaxWindow] (the proxy answers 413).
	ErrTooLarge = errors.New("decoded body too large")
	// ErrBudget: Options.Hold refused memory the decoding needs (the proxy
	// answers 503).
	ErrBudget = errors.New("no memory budget to decode")
	// ErrCorrupt: the data is not valid in its coding, ends early, or has
	// data after its end (the proxy answers 400).
	ErrCorrupt = errors.New("corrupt encoded body")
)

// Parse reads the Content-Encoding field lines values (each a
// comma-separated list of tokens, matched ignoring case and surrounding
// whitespace) into the codings applied to the body, in the order applied.
// identity and empty list elements are dropped; "x-gzip" is Gzip. It
// returns ErrUnsupported (wrapped, naming the token) for any other token
// and for more than MaxCodings codings.
func Parse(values [][]byte) ([]Coding, error) {
	var out []Coding
	for _, v := range values {
		for tok := range strings.SplitSeq(string(v), ",") {
			tok = strings.ToLower(strings.TrimSpace(tok))
			var c Coding
			switch tok {
			case "", "identity":
				continue
			case "gzip", "x-gzip":
				c = Gzip
			case "deflate":
				c = Deflate
			case "br":
				c = Brotli
			case "zstd":
				c = Zstd
			default:
				if len(tok) > 32 {
					tok = tok[:32] + "…"
				}
				return nil, fmt.Errorf("contentcoding: %q: %w", tok, ErrUnsupported)
			}
			if len(out) == MaxCodings {
				return nil, fmt.Errorf("contentcoding: more than %d codings: %w", MaxCodings, ErrUnsupported)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// Options configures [Decode].
type Options struct {
	// Limit is the most bytes any stage may decode to; past it Decode
	// returns ErrTooLarge. It must be positive.
	Limit int
	// Hold takes n bytes from the caller's memory budget before Decode
	// allocates them; false refuses the decoding (ErrBudget). Decode never
	// gives bytes back: the caller releases everything held once it drops
	// the result. nil: no budget.
	Hold func(n int) bool
}

// growStep is the smallest step, in bytes, by which an output buffer grows
// (and takes from the budget).
const growStep = 64 << 10

// MaxWindow is the largest decoder window, in bytes, Decode accepts: 16
// MiB, the most Brotli allows (RFC 7932 §9.1) and twice zstd's default
// window for its highest standard levels. A zstd frame asking for more is
// refused with ErrTooLarge.
const MaxWindow = 16 << 20

// stateBytes is what Decode holds for a decoder's own state (Huffman
// tables, buffers) besides its window: gzip and deflate keep a 32 KiB
// window within it.
const stateBytes = 64 << 10

// BrotliStateBytes is what the proxy holds for the decoder of a Brotli
// upstream answer besides its window ([BrotliWindow]), in bytes: its
// tables and buffers, as Decode's stateBytes.
const BrotliStateBytes = stateBytes

// BrotliWindow is the window, in bytes, a Brotli stream (RFC 7932 §9.1)
// asks for, read from its first one or two bytes b; ok is false when b is
// empty or asks for a large window (not RFC 7932). At most 16 MiB.
func BrotliWindow(b []byte) (window int, ok bool) { return brotliWindow(b) }

// ZstdStateBytes is what Decode holds for a zstd decoder besides its
// window, in bytes: its block buffers (a block holds at most 128 KiB, RFC
// 8878 §3.1.1.2.4) and tables. The proxy holds as much for the decoder of
// a zstd upstream answer.
const ZstdStateBytes = 384 << 10

// Decode undoes codings, applied to body in the order given, stage by
// stage from the last, each stage's output within opt.Limit. It holds, via
// opt.Hold, every byte it allocates for output and each decoder's window
// and state before allocating it. The result does not alias body. Errors:
// ErrTooLarge, ErrBudget, ErrCorrupt, ErrUnsupported (a Coding beyond the
// known ones), each wrapped with the coding. It never panics.
func Decode(body []byte, codings []Coding, opt Options) ([]byte, error) {
	if len(codings) > MaxCodings {
		return nil, fmt.Errorf("contentcoding: %d codings: %w", len(codings), ErrUnsupported)
	}
	out, decoded := body, false
	for i := len(codings) - 1; i >= 0; i-- {
		c := codings[i]
		if c == Identity {
			continue
		}
		next, err := decodeOne(out, c, opt)
		if err != nil {
			return nil, fmt.Errorf("contentcoding: %s: %w", c, err)
		}
		out, decoded = next, true
	}
	if !decoded {
		out = bytes.Clone(out) // identity only: never alias the input
	}
	return out, nil
}

// hold takes n bytes from opt's budget.
func (opt Options) hold(n int) bool { return opt.Hold == nil || n <= 0 || opt.Hold(n) }

// decodeOne undoes one coding.
func decodeOne(in []byte, c Coding, opt Options) ([]byte, error) {
	src := bytes.NewReader(in)
	var r io.Reader
	switch c {
	case Gzip:
		if !opt.hold(stateBytes) {
			return nil, ErrBudget
		}
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, corrupt(err)
		}
		r = zr
	case Deflate:
		if !opt.hold(stateBytes) {
			return nil, ErrBudget
		}
		zr, err := zlib.NewReader(src)
		if err != nil {
			// Not zlib-wrapped: read it as raw deflate data.
			src.Reset(in)
			zr = flate.NewReader(src)
		}
		defer zr.Close()
		r = zr
	case Brotli:
		window, ok := brotliWindow(in)
		if !ok {
			return nil, corrupt(errors.New("invalid window size"))
		}
		if !opt.hold(window + stateBytes) {
			return nil, ErrBudget
		}
		r = brotli.NewReader(src)
	case Zstd:
		window, err := ZstdWindow(in)
		if err != nil {
			return nil, err
		}
		if !opt.hold(window + ZstdStateBytes) {
			return nil, ErrBudget
		}
		// Later frames may not ask for more window than the first, which
		// is what was held; the output is bounded by readAll.
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(uint64(window)),
			zstd.WithDecoderMaxMemory(uint64(max(window, opt.Limit))))
		if err != nil {
			return nil, corrupt(err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, ErrUnsupported
	}
	out, err := readAll(r, len(in), opt)
	if err != nil {
		if c == Zstd && (errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)) {
			return nil, ErrTooLarge // a later frame asks for a larger window
		}
		return nil, err
	}
	if src.Len() > 0 {
		return nil, corrupt(fmt.Errorf("%d bytes after the end of the data", src.Len()))
	}
	return out, nil
}

// readAll reads r to its end into a buffer that grows in steps of at
// least growStep, each step held before it is allocated, up to opt.Limit.
// sizeHint (the encoded size) picks the first step.
func readAll(r io.Reader, sizeHint int, opt Options) ([]byte, error) {
	var out []byte
	for {
		if len(out) == cap(out) {
			if cap(out) >= opt.Limit {
				// Full at the limit: the data must end here.
				var one [1]byte
				n, err := io.ReadFull(r, one[:])
				if n > 0 {
					return nil, ErrTooLarge
				}
				if errors.Is(err, io.EOF) {
					return out, nil
				}
				return nil, readErr(err)
			}
			grow := min(max(cap(out), growStep, 2*sizeHint), opt.Limit-cap(out))
			if !opt.hold(grow) {
				return nil, ErrBudget
			}
			nb := make([]byte, len(out), cap(out)+grow)
			copy(nb, out)
			out = nb
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, readErr(err)
		}
	}
}

// readErr classifies a decoder's read error: a stream cut short or
// malformed is ErrCorrupt.
func readErr(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBudget) ||
		errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return err
	}
	return corrupt(err)
}

func corrupt(cause error) error { return fmt.Errorf("%w: %v", ErrCorrupt, cause) }

// brotliWindow is the window size, in bytes, a Brotli stream declares in
// its first bits (RFC 7932 §9.1, WBITS): 2^WBITS − 16 rounded up to a
// power of two, at most 16 MiB. ok is false for an empty stream or the
// large-window escape (not part of RFC 7932, refused).
func brotliWindow(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	bits := uint(b[0])
	if len(b) > 1 {
		bits |= uint(b[1]) << 8
	}
	switch {
	case bits&1 == 0:
		return 1 << 16, true
	case bits>>1&7 != 0:
		return 1 << (17 + bits>>1&7), true
	}
	switch n := bits >> 4 & 7; n {
	case 0:
		return 1 << 17, true
	case 1:
		return 0, false // large window (not RFC 7932)
	default:
		return 1 << (8 + n), true
	}
}

// zstd frame magic numbers (RFC 8878 §3.1.1, §3.1.2).
const (
	zstdMagic         = 0xFD2FB528
	skippableMagicLow = 0x184D2A50 // to 0x184D2A5F
)

// ZstdWindow is the window size, in bytes, of the first Zstandard frame of
// b (RFC 8878 §3.1.1.1.2: its Window_Descriptor, or its content size for a
// single-segment frame), skippable frames passed over; at least
// zstd.MinWindowSize. A window above MaxWindow is ErrTooLarge; a header
// that is not a frame's, or is cut short, ErrCorrupt. Decode reads the
// window of a request body with it, the proxy that of an upstream answer
// before its decoder allocates it.
func ZstdWindow(b []byte) (int, error) {
	for {
		if len(b) < 4 {
			return 0, corrupt(errors.New("no zstd frame"))
		}
		magic := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		if magic&0xFFFFFFF0 == skippableMagicLow {
			if len(b) < 8 {
				return 0, corrupt(errors.New("cut skippable frame"))
			}
			size := int(uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24)
			if size < 0 || size > len(b)-8 {
				return 0, corrupt(errors.New("cut skippable frame"))
			}
			b = b[8+size:]
			continue
		}
		if magic != zstdMagic || len(b) < 5 {
			return 0, corrupt(errors.New("not a zstd frame"))
		}
		fhd := b[4]
		single := fhd&(1<<5) != 0
		var window uint64
		if !single {
			if len(b) < 6 {
				return 0, corrupt(errors.New("cut frame header"))
			}
			wd := b[5]
			exp, mantissa := uint64(wd>>3), uint64(wd&7)
			base := uint64(1) << (10 + exp)
			window = base + base/8*mantissa
		} else {
			didSize := [4]int{0, 1, 2, 4}[fhd&3]
			fcsSize := [4]int{1, 2, 4, 8}[fhd>>6]
			at := 5 + didSize
			if len(b) < at+fcsSize {
				return 0, corrupt(errors.New("cut frame header"))
			}
			for i := fcsSize - 1; i >= 0; i-- {
				window = window<<8 | uint64(b[at+i])
			}
			if fcsSize == 2 {
				window += 256
			}
		}
		if window > MaxWindow {
			return 0, ErrTooLarge
		}
		return max(int(window), zstd.MinWindowSize), nil
	}
}
