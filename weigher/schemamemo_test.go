package weigher

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/bytememo"
	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/tidwall/gjson"
)

// schemaMemoLists are the tool lists of TestToolsCountCheckedSameAsWalk
// with every parameters object lengthened past bytememo.MinKey (a
// "$comment" member first, counted as text), so that the schema memo
// keeps them, beside the lists as they are; the lists the lengthening
// would make invalid ("parameters":{}) are left as they are.
func schemaMemoLists(t testing.TB) []string {
	pad := `"$comment":"` + strings.Repeat("memo ", 14) + `",`
	var out []string
	for _, l := range append(append([]string{}, toolLists...), checkedToolLists...) {
		out = append(out, l)
		long := strings.ReplaceAll(l, `"parameters":{`, `"parameters":{`+pad)
		if long != l && jsonscan.Check([]byte(long), jsonscan.Options{FoldCase: true, UTF8: true, MaxDepth: 1000}) == nil {
			out = append(out, long)
		}
	}
	if len(out) < len(toolLists)+len(checkedToolLists)+25 { // 31 lengthened when written
		t.Fatalf("only %d lists: the lengthening missed the parameters objects", len(out))
	}
	return out
}

// TestSchemaMemoSameCounts: a toolsCounter whose counter is a memoCounter
// (the schema memo on) gives the tokens and the check's verdict of one on
// the bare bpeCounter (no memo), on every list, counted again and again in
// one memo: without a check, then with each of the two element fields
// twice in a row (the second found in the memo with its verdict), over
// three rounds (every object found again after the others).
func TestSchemaMemoSameCounts(t *testing.T) {
	w := testWeigher(t)
	b := w.encoders[EncodingO200k].(*bpeCounter)
	ref := newToolsCounter(b, EncodingO200k)
	mc := b.takeMemo()
	defer b.putMemo(mc)
	tc := newToolsCounter(mc, EncodingO200k)
	lists := schemaMemoLists(t)
	failed := 0
	for round := range 3 {
		for i, list := range lists {
			v := gjson.Parse(list)
			if n, want := tc.count(v), ref.count(v); n != want {
				t.Errorf("round %d, list %d %.100s: count %d, without the memo %d", round, i, list, n, want)
			}
			for _, elem := range []*fields{toolFields, functionFields} {
				wantN, wantOK := toolsCheckRef(ref, v, elem)
				if !wantOK {
					failed++
				}
				for k := range 2 {
					if n, ok := tc.countChecked(v, elem); n != wantN || ok != wantOK {
						t.Errorf("round %d, list %d %.100s, check %d: countChecked %d, %v; without the memo %d, %v", round, i, list, k, n, ok, wantN, wantOK)
					}
				}
			}
		}
	}
	kept := mc.schemas.m.Len()
	if kept < bytememo.Ways || failed < 3*20 {
		t.Errorf("%d objects kept, %d failed checks: the lists no longer exercise the memo", kept, failed)
	}
}

// TestSchemaMemoFind: an object kept is found at the start of any text
// that starts with its bytes (what follows it is not its), only with the
// check it was kept with (or none), with its verdict; another object of
// the same length and the same first bytes, one changed in a byte, one
// too short or too long to keep, is not found.
func TestSchemaMemoFind(t *testing.T) {
	var m schemaMemo
	obj := `{"type":"object","properties":{"query":{"type":"string","description":"Words to search for"}}}`
	twin := strings.Replace(obj, "for", "fur", 1) // same length, same first 64 bytes
	f := &fields{}
	m.keep(obj, f, 4, true, true, 17)
	for _, c := range []struct {
		name       string
		s          string
		f          *fields
		fd         int
		check      bool
		tokens     int64
		n          int
		failed, ok bool
	}{
		{"alone, checked", obj, f, 4, true, 17, len(obj), true, true},
		{"followed, checked", obj + `},{"type":"function"}]`, f, 4, true, 17, len(obj), true, true},
		{"unchecked", obj + "}", nil, 0, false, 17, len(obj), false, true},
		{"other fields", obj, &fields{}, 4, true, 0, 0, false, false},
		{"other depth", obj, f, 3, true, 0, 0, false, false},
		{"twin", twin, f, 4, true, 0, 0, false, false},
		{"cut", obj[:len(obj)-1], nil, 0, false, 0, 0, false, false},
	} {
		tokens, n, failed, ok := m.find(c.s, c.f, c.fd, c.check)
		if tokens != c.tokens || n != c.n || failed != c.failed || ok != c.ok {
			t.Errorf("%s: find %d, %d, %v, %v; want %d, %d, %v, %v", c.name, tokens, n, failed, ok, c.tokens, c.n, c.failed, c.ok)
		}
	}
	// The twin kept beside it, unchecked: each found as itself.
	m.keep(twin, nil, 0, false, false, 18)
	if tokens, _, _, ok := m.find(twin, nil, 0, false); !ok || tokens != 18 {
		t.Errorf("twin: %d, %v; want 18, true", tokens, ok)
	}
	if tokens, _, _, ok := m.find(obj, nil, 0, false); !ok || tokens != 17 {
		t.Errorf("object after its twin: %d, %v; want 17, true", tokens, ok)
	}
	// Kept again with a check: one slot, the verdict and check replaced.
	m.keep(obj, f, 5, true, false, 17)
	if _, _, failed, ok := m.find(obj, f, 5, true); !ok || failed {
		t.Errorf("kept again: failed %v, found %v; want false, true", failed, ok)
	}
	if _, _, _, ok := m.find(obj, f, 4, true); ok {
		t.Error("kept again: the old check still found")
	}
	short := `{"type":"object","properties":{"a":{"type":"string"}}}`
	long := `{"type":"object","description":"` + strings.Repeat("x", bytememo.MaxKey) + `"}`
	for _, s := range []string{short, long} {
		m.keep(s, nil, 0, false, false, 5)
		if _, _, _, ok := m.find(s, nil, 0, false); ok {
			t.Errorf("an object of %d bytes was kept", len(s))
		}
	}
}

// FuzzSchemaMemoSameCounts holds the memo's counts and verdicts to the
// counter without it on any two lists that pass the request's scan,
// counted in turns in one memo (the second list's objects found among the
// first's).
func FuzzSchemaMemoSameCounts(f *testing.F) {
	lists := schemaMemoLists(f)
	for i, l := range lists {
		f.Add(l, lists[(i+7)%len(lists)])
	}
	w := testWeigher(f)
	b := w.encoders[EncodingO200k].(*bpeCounter)
	ref := newToolsCounter(b, EncodingO200k)
	f.Fuzz(func(t *testing.T, a, c string) {
		opts := jsonscan.Options{FoldCase: true, UTF8: true}
		if jsonscan.Check([]byte(a), opts) != nil || jsonscan.Check([]byte(c), opts) != nil {
			return
		}
		mc := b.takeMemo()
		defer b.putMemo(mc)
		mc.schemas = schemaMemo{}
		tc := newToolsCounter(mc, EncodingO200k)
		va, vc := gjson.Parse(strings.TrimSpace(a)), gjson.Parse(strings.TrimSpace(c))
		for _, v := range []gjson.Result{va, vc, va, vc} {
			if n, want := tc.count(v), ref.count(v); n != want {
				t.Fatalf("%q: count %d, without the memo %d", v.Raw, n, want)
			}
			for _, elem := range []*fields{toolFields, functionFields, toolFields} {
				n, ok := tc.countChecked(v, elem)
				if wantN, wantOK := toolsCheckRef(ref, v, elem); n != wantN || ok != wantOK {
					t.Fatalf("%q: countChecked %d, %v; without the memo %d, %v", v.Raw, n, ok, wantN, wantOK)
				}
			}
		}
	})
}
