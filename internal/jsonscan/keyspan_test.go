package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"testing"
)

// sameVerdict fails t unless Check and the hashed reference (every key
// hashed as it comes, the comparison Check made before small objects were
// compared as written) give b the same reason and offset under opt.
func sameVerdict(t *testing.T, b []byte, opt Options) {
	t.Helper()
	got, want := Check(b, opt), check(b, opt, true)
	if ReasonOf(got) != ReasonOf(want) {
		t.Fatalf("%q %+v: %v, hashed reference %v", b, opt, got, want)
	}
	if got != nil && got.(*Error).Offset != want.(*Error).Offset {
		t.Fatalf("%q %+v: offset %d, hashed reference %d", b, opt, got.(*Error).Offset, want.(*Error).Offset)
	}
}

// keySpanCases are objects whose keys repeat or nearly repeat, escaped or
// not, in small objects and past smallObject keys.
var keySpanCases = []string{
	`{"a":1,"a":2}`, `{"a":1,"b":2}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"\u0061":1,"\u0061":2}`,
	`{"ab":1,"a\u0062":2}`, `{"a\"":1,"a\u0022":2}`, `{"a\/":1,"a/":2}`, `{"\ud800":1,"\udfff":2}`,
	`{"\ud800":1,"\ufffd":2}`, `{"\ud83d\ude00":1,"😀":2}`, `{"a":{"a":1},"b":{"a":1,"a":2}}`,
	`{"a":1,"b":{"c":1},"a":2}`, `{"x":[{"k":1},{"k":1,"k":2}]}`, `{"":1,"":2}`, `{"a":1,"A":2}`,
	`{"ab":1,"ba":2,"a":3,"b":4}`, `{"a\\":1,"a\u005c":2}`,
	"{" + keys(16) + `,"k3":1}`, "{" + keys(15) + `,"k3":1}`, "{" + keys(17) + `,"k16":1}`,
	"{" + keys(40) + `,"k\u0031":1}`, "{" + keys(40) + "}", `{"o":{` + keys(20) + `},"o":1}`,
	`{"o":{` + keys(20) + `,"k19":{"a":1,"a":2}}}`, "{" + keys(30) + `,"k5":1,"k7":1}`,
	// Case variants, for FoldCase: capitals, escapes, and characters
	// that fold to ASCII (the Kelvin sign, the long s, the dotted I).
	`{"Max":1,"max":2}`, `{"max":1,"MAX":2}`, `{"Max":1,"Max":2}`, `{"ab":1,"a\u0042":2}`, `{"a\u0042":1,"AB":2}`,
	`{"k":1,"\u212a":2}`, `{"K":1,"\u212a":2}`, `{"s":1,"ſ":2}`, `{"ſ":1,"S":2}`, `{"i":1,"İ":2}`, `{"É":1,"é":2}`,
	`{"é":1,"é":2}`, `{"É":1,"\u00c9":2}`, `{"a":1,"b":2,"B":3}`, `{"A":1,"b":2,"a":3}`, `{"x":{"Y":1},"X":{"y":1}}`,
	"{" + keys(15) + `,"K3":1}`, "{" + keys(16) + `,"K3":1}`, "{" + keys(17) + `,"K16":1}`, `{"K0":1,` + keys(20) + "}",
	`{"Aa":1,"aA":2,"AA":3}`, `{"a\\":1,"A\u005c":2}`,
}

// TestKeySpansAsHashed: the comparison of small objects' keys as written
// gives every document the verdict and offset of the hashed reference,
// with and without the UTF-8 check, with and without FoldCase, on the
// cases above, each cut short at every byte.
func TestKeySpansAsHashed(t *testing.T) {
	dups := 0
	for _, c := range keySpanCases {
		for _, opt := range []Options{{DuplicateKeys: true}, {DuplicateKeys: true, UTF8: true}, {DuplicateKeys: true, MaxDepth: 2},
			{FoldCase: true}, {FoldCase: true, UTF8: true}, {FoldCase: true, MaxDepth: 2}} {
			for n := range len(c) + 1 {
				sameVerdict(t, []byte(c[:n]), opt)
			}
		}
		if ReasonOf(Check([]byte(c), Options{DuplicateKeys: true})) == DuplicateKey {
			dups++
		}
	}
	// The cases are not all alike: most repeat a key.
	if dups < len(keySpanCases)/2 || dups == len(keySpanCases) {
		t.Fatalf("%d of %d cases repeat a key", dups, len(keySpanCases))
	}
	// Some are case variants only.
	variants := 0
	for _, c := range keySpanCases {
		if ReasonOf(Check([]byte(c), Options{FoldCase: true})) == CaseVariantKey {
			variants++
		}
	}
	if variants < 10 {
		t.Fatalf("%d of %d cases are case variants", variants, len(keySpanCases))
	}
}

// TestKeySpansLarge: a repeated key past smallObject keys is found when the
// object closes, at the offset the hashed reference reports, in objects
// of every size around the threshold.
func TestKeySpansLarge(t *testing.T) {
	for n := 1; n <= 3*smallObject; n++ {
		for dup := range n {
			b := []byte("{" + keys(n) + `,"k` + itoa(dup) + `":1}`)
			err := Check(b, Options{DuplicateKeys: true})
			if ReasonOf(err) != DuplicateKey {
				t.Fatalf("%d keys, k%d again: %v", n, dup, err)
			}
			sameVerdict(t, b, Options{DuplicateKeys: true})
		}
		ok := []byte("{" + keys(n) + `,"k` + strings.Repeat("x", n) + `":1}`)
		if err := Check(ok, Options{DuplicateKeys: true}); err != nil {
			t.Fatalf("%d distinct keys: %v", n+1, err)
		}
	}
}

// FuzzKeySpans: any input gets from Check the verdict and offset of the
// hashed reference, under the options the weigher (FoldCase) and the
// upstream readers (DuplicateKeys) use.
func FuzzKeySpans(f *testing.F) {
	for _, c := range keySpanCases {
		f.Add([]byte(c), false)
	}
	f.Add([]byte(`{"k":"\xff","k":1}`), true)
	f.Fuzz(func(t *testing.T, b []byte, utf bool) {
		sameVerdict(t, b, Options{DuplicateKeys: true, UTF8: utf})
		sameVerdict(t, b, Options{DuplicateKeys: true, UTF8: utf, MaxDepth: 3})
		sameVerdict(t, b, Options{FoldCase: true, UTF8: utf})
		sameVerdict(t, b, Options{FoldCase: true, UTF8: utf, MaxDepth: 3})
		lay, ref := new(Layout), new(Layout)
		got, want := Check(b, Options{DuplicateKeys: true, Layout: lay}), check(b, Options{DuplicateKeys: true, Layout: ref}, true)
		if (got == nil) != (want == nil) || got == nil && (len(lay.Members) != len(ref.Members) || len(lay.Elems) != len(ref.Elems)) {
			t.Fatalf("%q: layout check %v (%d members), hashed %v (%d members)", b, got, len(lay.Members), want, len(ref.Members))
		}
	})
}

// TestStopMask: the lowest byte stopMask (and, with the UTF-8 check,
// stopMaskUTF8) flags is the first byte of the
// word that the string tables stop at (none when none does), for every
// byte value at every position, before and after other stops, with and
// without the UTF-8 check.
func TestStopMask(t *testing.T) {
	fills := []byte{'a', 0, 0x1f, 0x20, '"', '\\', 0x7f, 0x80, 0xff, '!', '#', '[', ']'}
	for _, utf := range []bool{false, true} {
		table, high := &str, uint64(0)
		if utf {
			table, high = &strUTF8, 0x8080808080808080
		}
		for p := range 8 {
			for c := range 256 {
				for _, before := range []byte{'a', 'z', ' '} {
					for _, after := range fills {
						var w [8]byte
						for k := range w {
							w[k] = before
							if k > p {
								w[k] = after
							}
						}
						w[p] = byte(c)
						want := 8
						for k := range w {
							if table[w[k]] != 0 {
								want = k
								break
							}
						}
						m := stopMask(binary.LittleEndian.Uint64(w[:]), high)
						got := 8
						if m != 0 {
							got = bits.TrailingZeros64(m) / 8
						}
						if got != want {
							t.Fatalf("utf8 %v, % x: first stop %d, stopMask says %d", utf, w, want, got)
						}
						if utf {
							if m := stopMaskUTF8(binary.LittleEndian.Uint64(w[:])); m == 0 && want != 8 || m != 0 && bits.TrailingZeros64(m)/8 != want {
								t.Fatalf("% x: first stop %d, stopMaskUTF8 flags %#x", w, want, m)
							}
						}
					}
				}
			}
		}
	}
}

// FuzzStopMask: on any eight bytes, the lowest byte stopMask (and
// stopMaskUTF8 with the UTF-8 check) flags is the
// first one the string tables stop at (none when none does), with and
// without the UTF-8 check; and plainRun finds, from any offset of any
// input, the first byte the table stops at.
func FuzzStopMask(f *testing.F) {
	f.Add([]byte(`ab"c\d`+"\x01\x80"), uint8(0))
	f.Add([]byte(`# !"`+"\x1f\x20\x21\x22\x23\x5c\x7f\xff"), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, from uint8) {
		for _, utf := range []bool{false, true} {
			table, high := &str, uint64(0)
			if utf {
				table, high = &strUTF8, 0x8080808080808080
			}
			if len(b) >= 8 {
				want := 8
				for k := range 8 {
					if table[b[k]] != 0 {
						want = k
						break
					}
				}
				got := 8
				if m := stopMask(binary.LittleEndian.Uint64(b), high); m != 0 {
					got = bits.TrailingZeros64(m) / 8
				}
				if got != want {
					t.Fatalf("utf8 %v, % x: first stop %d, stopMask says %d", utf, b[:8], want, got)
				}
				if m := stopMaskUTF8(binary.LittleEndian.Uint64(b)); utf && (m == 0 && want != 8 || m != 0 && bits.TrailingZeros64(m)/8 != want) {
					t.Fatalf("% x: first stop %d, stopMaskUTF8 flags %#x", b[:8], want, m)
				}
			}
			i := min(int(from), len(b))
			want := i
			for want < len(b) && table[b[want]] == 0 {
				want++
			}
			if got := plainRun(b, i, high, table); got != want {
				t.Fatalf("utf8 %v, %q from %d: first stop %d, plainRun says %d", utf, b, i, want, got)
			}
		}
	})
}

// escRunByBytes is escRun byte by byte: the first byte the table stops
// at that does not open a two-byte escape, stepping over those that do,
// and whether it stepped over one.
func escRunByBytes(b []byte, i int, table *[256]uint8) (int, bool) {
	esc := false
	for i < len(b) {
		if table[b[i]] == 0 {
			i++
			continue
		}
		if b[i] == '\\' && i+1 < len(b) && strings.IndexByte(`"\/bfnrt`, b[i+1]) >= 0 {
			i += 2
			esc = true
			continue
		}
		break
	}
	return i, esc
}

// TestEscRun: escRun stops where the byte-by-byte run stops, from every
// offset, on escapes at every place of a word, runs of backslashes, \u
// escapes, bad escapes and a backslash at the end, with and without the
// UTF-8 check.
func TestEscRun(t *testing.T) {
	inputs := []string{
		`abc\ndef\tghi"`, `\\\\\\\"x"`, `\\\`, `a\u00e9b"`, `a\xb"`, `\"\"\"\"\"\"\"\"\"\"`,
		"caf\xc3\xa9 \\n\x01", `0123456\n0123456\/0123456\\0123456\r"`, `\`, ``,
	}
	for n := range 20 {
		inputs = append(inputs, strings.Repeat("x", n)+`\n`+strings.Repeat("y", 20-n)+`\q"`)
	}
	for _, in := range inputs {
		sameEscRun(t, []byte(in))
	}
}

// FuzzEscRun: as TestEscRun, on any input.
func FuzzEscRun(f *testing.F) {
	f.Add([]byte(`abc\ndef\tghi"`))
	f.Add([]byte(`\\\\\\\"x\u0041\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameEscRun(t, b)
	})
}

// sameEscRun compares escRun with escRunByBytes from every offset of b.
func sameEscRun(t *testing.T, b []byte) {
	t.Helper()
	for _, utf := range []bool{false, true} {
		table, high := &str, uint64(0)
		if utf {
			table, high = &strUTF8, 0x8080808080808080
		}
		for i := 0; i <= len(b); i++ {
			wantEnd, wantEsc := escRunByBytes(b, i, table)
			if end, esc := escRun(b, i, high, table); end != wantEnd || esc != wantEsc {
				t.Fatalf("utf8 %v, %q from %d: escRun %d %v, byte by byte %d %v", utf, b, i, end, esc, wantEnd, wantEsc)
			}
		}
	}
}
