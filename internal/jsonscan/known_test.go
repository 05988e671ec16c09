package jsonscan

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// passing is a Known that vouches for a value only when its bytes pass
// Check at the place offered (wrapped as {"k":[v]} for an element, {"k":v}
// for a list), under opt, as a caller's memory of values seen passing
// does; want picks the keys and kinds it wants. It records what it was
// offered.
type passing struct {
	b       []byte
	opt     Options
	want    func(key string, elem bool) bool
	elem    bool
	offered []string
	vouched int
}

func (p *passing) Wants(key Span, elem bool) bool {
	p.elem = elem
	return p.want(string(p.b[key.Start:key.End]), elem)
}

func (p *passing) Vouch(start, end int) bool {
	v := string(p.b[start:end])
	p.offered = append(p.offered, v)
	wrapped := `{"k":` + v + `}`
	if p.elem {
		wrapped = `{"k":[` + v + `]}`
	}
	opt := p.opt
	opt.Layout, opt.Known = nil, nil
	if Check([]byte(wrapped), opt) != nil {
		return false
	}
	p.vouched++
	return true
}

// checkKnown checks b under opt with a Known that vouches for every value
// that would pass: the outcome (error, reason and offset) and the layout
// are those of the scan without it.
func checkKnown(t *testing.T, b []byte, opt Options, want func(string, bool) bool) *passing {
	t.Helper()
	var plain, known Layout
	opt.Layout = &plain
	err := Check(b, opt)
	p := &passing{b: b, opt: opt, want: want}
	opt.Layout, opt.Known = &known, p
	got := Check(b, opt)
	var e1, e2 *Error
	if (err == nil) != (got == nil) || err != nil && (!errors.As(err, &e1) || !errors.As(got, &e2) || *e1 != *e2) {
		t.Fatalf("%q: with Known %v, without %v", b, got, err)
	}
	if err == nil && (plain.Dropped != known.Dropped || !plain.Dropped &&
		(!slices.Equal(plain.Members, known.Members) || !slices.Equal(plain.Elems, known.Elems))) {
		t.Fatalf("%q: layout with Known %+v, without %+v", b, known, plain)
	}
	return p
}

func wantAll(string, bool) bool { return true }

// TestKnownSkipsWhatItVouchesFor: lists and object elements of top-level
// arrays are offered, under the keys wanted; what is vouched for is not
// scanned (a Known vouching for bad bytes gets them past), what is not is
// scanned as ever.
func TestKnownSkipsWhatItVouchesFor(t *testing.T) {
	b := []byte(`{"m":[{"a":1},{"b":[2]}, 3 ,"x"],"t":[{"c":1}],"o":{"d":[{"e":1}]},"s":"[{}]"}`)
	p := checkKnown(t, b, Options{FoldCase: true, UTF8: true}, func(key string, elem bool) bool { return key == `"m"` == elem })
	want := []string{`{"a":1}`, `{"b":[2]}`, `[{"c":1}]`}
	if !slices.Equal(p.offered, want) || p.vouched != 3 {
		t.Fatalf("offered %q (%d vouched), want %q", p.offered, p.vouched, want)
	}
	// What it vouches for is not checked: a Known must vouch only for
	// bytes it saw pass.
	for _, bad := range []string{`{"m":[{"a":1,"a":2}]}`, `{"m":[{"a":[[[[1]]]]}]}`, "{\"m\":[{\"a\":\"\xff\"}]}", `{"t":[{"A":1,"a":1},tru]}`} {
		var lay Layout
		yes := &always{}
		if err := Check([]byte(bad), Options{MaxDepth: 4, FoldCase: true, UTF8: true, Layout: &lay, Known: yes}); err != nil {
			t.Errorf("%q vouched for: %v", bad, err)
		}
		if err := Check([]byte(bad), Options{MaxDepth: 4, FoldCase: true, UTF8: true}); err == nil {
			t.Errorf("%q passes without Known", bad)
		}
	}
	// Not wanted, or not vouched for: checked.
	for _, bad := range []string{`{"m":[{"a":1,"a":2}]}`, `{"t":[{"A":1,"a":1}]}`, `{"m":[{"a":1}],"m":[]}`, `{"t":[1 2]}`, `{"t":[}`, `{"t":[1,}`, `{"t":[`, `{"m":[{"a":"}`} {
		checkKnown(t, []byte(bad), Options{MaxDepth: 4, FoldCase: true, UTF8: true}, wantAll)
		var lay Layout
		if err := Check([]byte(bad), Options{MaxDepth: 4, FoldCase: true, UTF8: true, Layout: &lay, Known: &never{}}); err == nil {
			t.Errorf("%q passes with a Known that vouches for nothing", bad)
		}
	}
}

type always struct{}

func (*always) Wants(Span, bool) bool { return true }
func (*always) Vouch(int, int) bool   { return true }

type never struct{}

func (*never) Wants(Span, bool) bool { return true }
func (*never) Vouch(int, int) bool   { return false }

// FuzzKnown: with a Known that vouches only for values that pass where
// they stand, Check says what it says without one, at the same offset,
// and lays out the same members and elements.
func FuzzKnown(f *testing.F) {
	for _, s := range []string{
		`{"m":[{"a":1},{"b":[2]}],"t":[{"c":1}]}`, `{"m":[{"a":1,"a":2}]}`, `{"m":[{"A":1,"a":2}]}`,
		`{"m":[{"a":"\ud800"},{"a":"\\\""}],"t":[1,"]",{"x":"[{"}]}`, `{"t":[1 2]}`, `{"t":[}`, `{"m":[{"a":[[[[[1]]]]]}]}`,
		"{\"m\":[{\"a\":\"\xff\"}]}", `{"m":[{}],"M":[]}`, `{"m" : [ {"a":1} , {"b":2} ] , "t" : [ ] }`,
	} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		checkKnown(t, b, Options{MaxDepth: int(limit%8) + 1, FoldCase: true, UTF8: true}, wantAll)
		checkKnown(t, b, Options{MaxDepth: -1}, func(key string, elem bool) bool { return strings.Contains(key, "m") == elem })
	})
}

// TestSkip: Skip ends where a checked value ends, whatever its strings
// hold; -1 when the input ends first.
func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"a":"]}\\"}x`, 12}, {`"abcdefghij\"klmnopq\\"`, 23}, {`[1,[2],{"}":"{"}]`, 17}, {`12 `, 2}, {`true,`, 4},
		{`"abc`, -1}, {`{"a":[1]`, -1}, {`"abcdefgh\`, -1}, {`[`, -1}, {``, -1},
	} {
		if got := Skip([]byte(tc.in), 0); got != tc.want {
			t.Errorf("Skip(%q) = %d, want %d", tc.in, got, tc.want)
		}
		if tc.want > 0 && bytes.HasPrefix([]byte(tc.in), []byte{'{'}) {
			if err := Check([]byte(tc.in[:tc.want]), Options{}); err != nil {
				t.Errorf("%q: %v", tc.in[:tc.want], err)
			}
		}
	}
}

// guessing is a passing Known that also guesses ends (KnownEnds): from
// guesses, in turn, an offset from the element's start (the true end, one
// short, one long, past trailing space, anywhere); it counts the guesses
// Vouch accepted. Like the weigher's memo, it vouches only for one value
// (bytes seen as one element), never a run of them (`{}],"k":[{}`).
type guessing struct {
	passing
	guesses []int
	turn    int
	taken   int
	last    [2]int
	// loose: vouch for any bytes that pass where they stand (a value
	// with the space after it too), for the check Check makes itself.
	loose bool
}

func (g *guessing) End(start int) int {
	if len(g.guesses) == 0 {
		return -1
	}
	d := g.guesses[g.turn%len(g.guesses)]
	g.turn++
	if d == declined {
		g.last = [2]int{-1, -1}
		return NotOffered
	}
	end := start + d
	if d == 0 { // the true end
		end = Skip(g.b, start)
	}
	g.last = [2]int{start, end}
	return end
}

func (g *guessing) Vouch(start, end int) bool {
	if !g.loose && Skip(g.b[start:end], 0) != end-start { // not one value: never seen as an element
		return false
	}
	ok := g.passing.Vouch(start, end)
	if ok && g.last == [2]int{start, end} {
		g.taken++
	}
	return ok
}

// declined is the guess (in guessing.guesses) that End answers with
// NotOffered.
const declined = -128

// checkGuessing is checkKnown with a guessing Known.
func checkGuessing(t *testing.T, b []byte, opt Options, want func(string, bool) bool, guesses []int, loose bool) *guessing {
	t.Helper()
	var plain, known Layout
	opt.Layout = &plain
	err := Check(b, opt)
	g := &guessing{passing: passing{b: b, opt: opt, want: want}, guesses: guesses, loose: loose}
	opt.Layout, opt.Known = &known, g
	got := Check(b, opt)
	var e1, e2 *Error
	if (err == nil) != (got == nil) || err != nil && (!errors.As(err, &e1) || !errors.As(got, &e2) || *e1 != *e2) {
		t.Fatalf("%q, guesses %v: with KnownEnds %v, without %v", b, guesses, got, err)
	}
	if err == nil && (plain.Dropped != known.Dropped || !plain.Dropped && !sameLayout(plain, known)) {
		t.Fatalf("%q, guesses %v: layout with KnownEnds %+v, without %+v", b, guesses, known, plain)
	}
	return g
}

// sameLayout reports whether known lays out what plain does, member by
// member: the same keys and values, and the same elements but for a list
// known stepped over whole (Unlaid), which has none.
func sameLayout(plain, known Layout) bool {
	if len(plain.Members) != len(known.Members) {
		return false
	}
	for i, p := range plain.Members {
		k := known.Members[i]
		if p.Key != k.Key || p.Value != k.Value || p.Unlaid {
			return false
		}
		if k.Unlaid {
			if k.First != k.Last {
				return false
			}
			continue
		}
		if !slices.Equal(plain.Elems[p.First:p.Last], known.Elems[k.First:k.Last]) {
			return false
		}
	}
	return true
}

// TestKnownEndsGuesses: a right guess steps over the element without
// Skip; a wrong one (short, long, past the space after it, past the
// input) changes nothing: the element is found and offered as without
// guesses.
func TestKnownEndsGuesses(t *testing.T) {
	b := []byte(`{"m":[{"a":"}"} , {"b":[2]},{"c":{}}]}`)
	elems := func(_ string, elem bool) bool { return elem }
	g := checkGuessing(t, b, Options{FoldCase: true, UTF8: true}, elems, []int{0}, false)
	if g.taken != 3 {
		t.Errorf("right guesses: %d taken, want 3", g.taken)
	}
	for _, wrong := range []int{-1, 1, 2, 3, 7, 10, 100} {
		g := checkGuessing(t, b, Options{FoldCase: true, UTF8: true}, elems, []int{wrong}, false)
		if g.taken != 0 || g.vouched != 3 {
			t.Errorf("guess +%d: %d taken, %d vouched; want 0 and 3", wrong, g.taken, g.vouched)
		}
	}
	// Declined (NotOffered): checked as if not wanted, never offered.
	g = checkGuessing(t, b, Options{FoldCase: true, UTF8: true}, elems, []int{declined}, false)
	if g.taken != 0 || g.vouched != 0 {
		t.Errorf("declined: %d taken, %d vouched; want none", g.taken, g.vouched)
	}
	// Declined and guessed in turn: only the guessed ones are taken.
	if g := checkGuessing(t, b, Options{FoldCase: true, UTF8: true}, elems, []int{declined, 0}, false); g.taken != 1 || g.vouched != 1 {
		t.Errorf("declined, right, declined: %d taken, %d vouched; want 1 and 1", g.taken, g.vouched)
	}
	// `{"a":"}"} ` plus the space, vouched for by a Known that checks
	// only that the bytes pass where they stand: refused by Check for not
	// ending with '}'.
	if g := checkGuessing(t, b, Options{}, elems, []int{10}, true); g.taken != 0 {
		t.Errorf("a guess past the space taken")
	}
}

// FuzzKnownEnds: with a KnownEnds that guesses anything and vouches only
// for values that pass where they stand, Check says what it says without
// one and lays out the same members and elements.
func FuzzKnownEnds(f *testing.F) {
	for _, s := range []string{
		`{"m":[{"a":1},{"b":[2]}],"t":[{"c":1}]}`, `{"m":[{"a":1} ,{"a":2}]}`, `{"m":[{"A":1,"a":2}]}`,
		`{"m":[{"a":"\ud800"},{"a":"\\\"}"}],"t":[1,"]",{"x":"[{"}]}`, `{"m":[{}]}`, `{"m":[{"a":[[[[[1]]]]]}]}`,
	} {
		f.Add([]byte(s), uint8(4), int8(0), int8(1))
		f.Add([]byte(s), uint8(12), int8(declined), int8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8, g1, g2 int8) {
		want := wantAll
		if limit&8 != 0 {
			want = func(_ string, elem bool) bool { return elem }
		}
		checkGuessing(t, b, Options{MaxDepth: int(limit%8) + 1, FoldCase: true, UTF8: true}, want, []int{int(g1), int(g2)}, false)
	})
}

// TestKnownEndsLists: a list Known wants whole, guessed right, is stepped
// over and laid out Unlaid; guessed wrong, its elements are found as
// without guesses.
func TestKnownEndsLists(t *testing.T) {
	b := []byte(`{"m":[{"a":1},{"b":2}],"t":[{"c":"]"} , {"d":[3]}]}`)
	lists := func(key string, elem bool) bool { return !elem && key == `"t"` }
	var lay Layout
	g := &guessing{passing: passing{b: b, opt: Options{FoldCase: true, UTF8: true}, want: lists}, guesses: []int{0}}
	if err := Check(b, Options{FoldCase: true, UTF8: true, Layout: &lay, Known: g}); err != nil {
		t.Fatal(err)
	}
	if g.taken != 1 || !lay.Members[1].Unlaid || lay.Members[0].Unlaid || lay.Members[1].First != lay.Members[1].Last {
		t.Errorf("right guess: %d taken, layout %+v", g.taken, lay)
	}
	for _, wrong := range []int{-1, 1, 5, declined} {
		checkGuessing(t, b, Options{FoldCase: true, UTF8: true}, lists, []int{wrong}, false)
	}
}
