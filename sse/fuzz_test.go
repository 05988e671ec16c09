package sse

import (
	"strings"
	"testing"
)

// FuzzScanner feeds random input split at random points and checks that
// the raw bytes delivered plus Buffered reproduce the input, that the
// normalized scan does not depend on the split, and that a small limit only
// merges events into truncated pieces without losing or reordering bytes.
func FuzzScanner(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(strings.Join(tc.chunks, "")), []byte{1, 3, 0, 7}, uint8(0))
	}
	f.Add(openAIStream(5), []byte{100, 17}, uint8(3))
	f.Add([]byte("data: "+strings.Repeat("z", 300)+"\r\n\r\ndata: x\r\r"), []byte{9}, uint8(0))
	f.Add([]byte("{\"id\":1}\ndata: [DONE]\n\ndat: x\r\revent: e\nfoo\n\n: c\nretry: 1\n\n"), []byte{5}, uint8(0))
	f.Fuzz(func(t *testing.T, in, cuts []byte, small uint8) {
		sizes := make([]int, len(cuts))
		for k, c := range cuts {
			sizes[k] = int(c)
		}
		for _, limit := range []int{0, MinMaxEventBytes + int(small)} {
			s := Scanner{MaxEventBytes: limit}
			one, obuf := feedAll(t, &s, [][]byte{in})
			if c := concat(one, obuf); c != string(in) {
				t.Fatalf("limit %d, one shot: concatenation differs from input", limit)
			}
			for k, r := range one {
				if !r.Truncated && r.Stray != strayBySplit(r.Raw, k == 0) {
					t.Fatalf("limit %d, event %d %q: Stray %v, the plain reader says %v", limit, k, r.Raw, r.Stray, !r.Stray)
				}
			}
			o, obuf := normalize(one, obuf)
			for _, chunks := range [][][]byte{splitBy(in, sizes), bytewise(in)} {
				s.Reset()
				got, buf := feedAll(t, &s, chunks)
				if c := concat(got, buf); c != string(in) {
					t.Fatalf("limit %d, %d chunks: concatenation %q, want %q", limit, len(chunks), c, in)
				}
				g, gbuf := normalize(got, buf)
				if d := sameScan(g, gbuf, o, obuf); d != "" {
					t.Fatalf("limit %d, %d chunks: %s", limit, len(chunks), d)
				}
			}
		}
	})
}
