package weigher

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// shapeAlts are values put in place of an answer's tokens: valid numbers
// and strings of other lengths and forms, invalid ones, and values of
// other kinds.
var shapeAlts = []string{"0", "7", "123456789012345678", "-1", "1.5e3", "-0", "05", "1.", "-", "1e", `""`, `"x"`, `"\u00e9\n\""`, `"\x"`, "\"a\x01\"", `"unterminated`, "null", "true", "{}", "[]", `{"a":1}`, ""}

// TestAnswerShapeSameAsRef: an answer read by the shape of another (the
// fast path of answerScan.scan) is decided and noted as scanRef reads it,
// for every decided answer case and hostile answer as the shape and, as
// the answer read, each of its tokens swapped for each of shapeAlts, each
// cut, and each byte replaced; and an answer that differs from the shape
// only in valid tokens of the same kinds is read by the shape (no miss).
func TestAnswerShapeSameAsRef(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	defer chatShape.Store(nil)
	shaped, hits := 0, 0
	for _, c := range append(answerCases(), hostileAnswers()...) {
		chatShape.Store(nil)
		if s := newAnswerScan("usage", "", true); !s.scan([]byte(c), 0) {
			continue
		}
		sh := chatShape.Load()
		if sh == nil {
			continue // beyond a shape's bounds
		}
		shaped++
		read := func(b []byte) {
			t.Helper()
			for _, depth := range answerDepths {
				chatShape.Store(sh)
				s, r := newAnswerScan("usage", "", true), newAnswerScan("usage", "", true)
				got, want := s.scan(b, depth), r.scanRef(b, depth)
				if got != want || got && (s.at != r.at || s.end != r.end) {
					t.Fatalf("%q read by the shape of %q (depth %d): %v %v %v, scanRef %v %v %v", b, c, depth, got, s.at, s.end, want, r.at, r.end)
				}
			}
		}
		for _, tok := range sh.toks {
			for _, alt := range shapeAlts {
				b := []byte(c[:tok.at] + alt + c[tok.end:])
				read(b)
				if same := tok.num && (alt == "123456789012345678" || alt == "1.5e3") || !tok.num && (alt == `""` || alt == `"\u00e9\n\""`); same {
					chatShape.Store(sh)
					before := sh.misses.Load()
					if s := newAnswerScan("usage", "", true); !s.scan(b, 0) || sh.misses.Load() != before {
						t.Errorf("%q: not read by the shape of %q", b, c)
					}
					hits++
				}
			}
		}
		for n := range len(c) {
			read([]byte(c[:n]))
			for _, r := range []byte{'"', '\\', '}', ',', ' ', '0', 0x01} {
				b := []byte(c)
				b[n] = r
				read(b)
			}
		}
	}
	if shaped < 100 || hits < 1000 {
		t.Fatalf("%d answers made a shape, %d were read by one", shaped, hits)
	}
}

// FuzzAnswerShapeSameAsRef: an answer read by the shape of another, any
// two inputs, is decided and noted as scanRef reads it.
func FuzzAnswerShapeSameAsRef(f *testing.F) {
	cases := append(answerCases(), hostileAnswers()...)
	for i, c := range cases {
		f.Add([]byte(c), []byte(cases[(i*7+1)%len(cases)]))
		f.Add([]byte(c), []byte(c))
	}
	f.Fuzz(func(t *testing.T, shape, body []byte) {
		defer chatShape.Store(nil)
		chatShape.Store(nil)
		if s := newAnswerScan("usage", "", true); !s.scan(shape, 0) {
			return
		}
		sh := chatShape.Load()
		for _, depth := range answerDepths {
			chatShape.Store(sh)
			s, r := newAnswerScan("usage", "", true), newAnswerScan("usage", "", true)
			got, want := s.scan(body, depth), r.scanRef(body, depth)
			if got != want || got && (s.at != r.at || s.end != r.end) {
				t.Fatalf("%q read by the shape of %q (depth %d): %v %v %v, scanRef %v %v %v", body, shape, depth, got, s.at, s.end, want, r.at, r.end)
			}
		}
	})
}

// TestCommonPrefix: the block and word comparisons stop where a byte loop
// does, for every length up to 100 of either side (three 32-byte blocks
// and a tail of words and bytes) and every place of the first difference.
func TestCommonPrefix(t *testing.T) {
	base := []byte(strings.Repeat("abcdefghijklmnopqrstuvwxy", 4))
	for la := range len(base) + 1 {
		for lb := range len(base) + 1 {
			for d := range min(la, lb) + 1 {
				a, b := append([]byte(nil), base[:la]...), append([]byte(nil), base[:lb]...)
				if d < min(la, lb) {
					b[d] ^= 0x20
				}
				want := 0
				for want < min(la, lb) && a[want] == b[want] {
					want++
				}
				if got := commonPrefix(a, b); got != want {
					t.Fatalf("%q, %q: %d, want %d", a, b, got, want)
				}
			}
		}
	}
}

// TestAnswerShapeSequenceSameAsRef: answers read one after another
// through the shared shape, as a proxy's Weighers read them — the shape
// made by one, kept or renewed (every shapeRenew-th miss), read by the
// next, two upstreams' answers alternating, from four goroutines at once —
// are each decided and noted as scanRef reads them alone. Run with -race.
func TestAnswerShapeSequenceSameAsRef(t *testing.T) {
	defer chatShape.Store(nil)
	chatShape.Store(nil)
	var seq [][]byte
	for _, c := range append(answerCases(), hostileAnswers()...) {
		seq = append(seq, []byte(c))
		// The answer with each of its tokens swapped for each of
		// shapeAlts, as a later answer of the same upstream.
		s := newAnswerScan("usage", "", true)
		chatShape.Store(nil)
		if !s.scan([]byte(c), 0) || chatShape.Load() == nil {
			continue
		}
		for i, tok := range chatShape.Load().toks {
			alt := shapeAlts[i%len(shapeAlts)]
			seq = append(seq, []byte(c[:tok.at]+alt+c[tok.end:]))
		}
	}
	chatShape.Store(nil)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range len(seq) {
				b := seq[(i*(2*g+1)+g)%len(seq)] // each goroutine its own order
				depth := answerDepths[(i+g)%len(answerDepths)]
				s, r := newAnswerScan("usage", "", true), newAnswerScan("usage", "", true)
				got, want := s.scan(b, depth), r.scanRef(b, depth)
				if got != want || got && (s.at != r.at || s.end != r.end) {
					errs <- fmt.Sprintf("%q (depth %d): %v %v %v, scanRef %v %v %v", b, depth, got, s.at, s.end, want, r.at, r.end)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if len(seq) < 1000 {
		t.Fatalf("%d answers in the sequence", len(seq))
	}
}
