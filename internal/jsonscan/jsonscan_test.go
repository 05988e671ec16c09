package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name   string
		in     string
		opt    Options
		reason Reason
		offset int
	}{
		{name: "object", in: `{"a":[1,-2.5e+3,"x\u00e9\n",true,false,null,{}],"b":{}}`},
		{name: "whitespace around", in: " \t\r\n[ 1 , 2 ]\n"},
		{name: "scalar", in: `"s"`},
		{name: "number", in: `-0.0E-7`},
		{name: "empty", in: ``, reason: Truncated, offset: 0},
		{name: "only space", in: `   `, reason: Truncated, offset: 3},
		{name: "byte-order mark", in: "\xef\xbb\xbf{}", reason: Syntax, offset: 0},
		{name: "trailing value", in: `{} {}`, reason: Trailing, offset: 3},
		{name: "trailing comma", in: `[1,]`, reason: Syntax, offset: 3},
		{name: "leading zero", in: `[01]`, reason: Syntax, offset: 2},
		{name: "bare dot", in: `1.`, reason: Truncated, offset: 2},
		{name: "plus sign", in: `+1`, reason: Syntax, offset: 0},
		{name: "NaN", in: `NaN`, reason: Syntax, offset: 0},
		{name: "single quotes", in: `{'a':1}`, reason: Syntax, offset: 1},
		{name: "comment", in: `{"a":1 /* c */}`, reason: Syntax, offset: 7},
		{name: "control char in string", in: "\"a\tb\"", reason: Syntax, offset: 2},
		{name: "bad escape", in: `"\x"`, reason: Syntax, offset: 2},
		{name: "short unicode escape", in: `"\u12G4"`, reason: Syntax, offset: 5},
		{name: "unterminated string", in: `["abc`, reason: Truncated, offset: 5},
		{name: "missing colon", in: `{"a" 1}`, reason: Syntax, offset: 5},
		{name: "non-string key", in: `{1:2}`, reason: Syntax, offset: 1},
		{name: "tru", in: `tru`, reason: Truncated, offset: 3},
		{name: "trux", in: `trux`, reason: Syntax, offset: 3},
		{name: "unclosed", in: `[[1]`, reason: Truncated, offset: 4},
		{name: "mismatched", in: `[1}`, reason: Syntax, offset: 2},
		{name: "depth 128 passes", in: deep(128)},
		{name: "depth 129 refused", in: deep(129), reason: TooDeep, offset: 128},
		{name: "objects at the limit", in: deepObj(128)},
		{name: "objects over the limit", in: deepObj(129), reason: TooDeep, offset: 5 * 128},
		{name: "custom limit", in: deep(3), opt: Options{MaxDepth: 2}, reason: TooDeep, offset: 2},
		{name: "no limit", in: deep(100000), opt: Options{MaxDepth: -1}},
		{name: "deep then syntax: depth wins", in: deep(200)[:150] + "x", reason: TooDeep, offset: 128},
		{name: "mixed containers past 64 levels", in: strings.Repeat(`[{"k":`, 100) + "0" + strings.Repeat("}]", 100), opt: Options{MaxDepth: 200}},
		{name: "mixed containers closed wrongly", in: strings.Repeat(`[{"k":`, 40) + "0" + strings.Repeat("]}", 40), opt: Options{MaxDepth: 200}, reason: Syntax, offset: 6*40 + 1},
		{name: "duplicate ignored without the option", in: `{"a":1,"a":2}`},
		{name: "duplicate key", in: `{"a":1,"a":2}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: 7},
		{name: "escaped duplicate", in: `{"max_tokens":1,"max\u005ftokens":2}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: 16},
		{name: "surrogate pair duplicate", in: `{"😀":1,"\ud83d\ude00":2}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: 10},
		{name: "unpaired surrogates are U+FFFD", in: `{"\ud800":1,"\udfff":2}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: 12},
		{name: "sibling objects may share keys", in: `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":1}]}`, opt: Options{DuplicateKeys: true}},
		{name: "inner object's keys do not leak", in: `{"a":{"b":1},"b":2}`, opt: Options{DuplicateKeys: true}},
		{name: "empty objects", in: `{"a":{},"b":{}}`, opt: Options{DuplicateKeys: true}},
		{name: "many keys, none repeated", in: `{` + keys(1000) + `}`, opt: Options{DuplicateKeys: true}},
		{name: "many keys, one repeated late", in: `{` + keys(1000) + `,"k17":0}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: len(keys(1000)) + 1 + 1},
		{name: "many keys, repeated early", in: `{"k999":0,` + keys(1000) + `}`, opt: Options{DuplicateKeys: true}, reason: DuplicateKey, offset: 0},
		// Options.UTF8: RFC 8259 §8.1.
		{name: "UTF-8 passes", in: `{"a":"café ` + "café 😀 日本" + `"}`, opt: Options{UTF8: true}},
		{name: "byte-order mark named", in: "\xef\xbb\xbf{}", opt: Options{UTF8: true}, reason: ByteOrderMark, offset: 0},
		{name: "byte-order mark after space", in: " \xef\xbb\xbf{}", opt: Options{UTF8: true}, reason: Syntax, offset: 1},
		{name: "UTF-16LE", in: "{\x00\"\x00a\x00\"\x00:\x001\x00}\x00", opt: Options{UTF8: true}, reason: NotUTF8, offset: 1},
		{name: "UTF-16BE", in: "\x00{\x00\"\x00a\x00\"\x00:\x001\x00}", opt: Options{UTF8: true}, reason: NotUTF8, offset: 0},
		{name: "UTF-16LE with its mark", in: "\xff\xfe{\x00}\x00", opt: Options{UTF8: true}, reason: NotUTF8, offset: 0},
		{name: "UTF-32BE", in: "\x00\x00\x00{\x00\x00\x00}", opt: Options{UTF8: true}, reason: NotUTF8, offset: 0},
		{name: "Latin-1 in a string", in: "{\"a\":\"caf\xe9\"}", opt: Options{UTF8: true}, reason: NotUTF8, offset: 9},
		{name: "Latin-1 passes without the option", in: "{\"a\":\"caf\xe9\"}"},
		{name: "encoded surrogate", in: "[\"\xed\xa0\x80\"]", opt: Options{UTF8: true}, reason: NotUTF8, offset: 2},
		{name: "overlong slash", in: "[\"\xc0\xaf\"]", opt: Options{UTF8: true}, reason: NotUTF8, offset: 2},
		{name: "cut rune", in: "[\"\xe6\x97\"]", opt: Options{UTF8: true}, reason: NotUTF8, offset: 2},
		{name: "raw NUL in a string", in: "{\"a\":\"x\x00\"}", opt: Options{UTF8: true}, reason: NotUTF8, offset: 7},
		{name: "invalid byte outside strings", in: "{\"a\":1\xff}", opt: Options{UTF8: true}, reason: NotUTF8, offset: 6},
		{name: "valid non-ASCII outside strings is syntax", in: "{\"a\":1\u00a0}", opt: Options{UTF8: true}, reason: Syntax, offset: 6},
		{name: "NaN stays syntax", in: `{"a":NaN}`, opt: Options{UTF8: true}, reason: Syntax, offset: 5},
		// Options.FoldCase.
		{name: "case variants pass without the option", in: `{"max_tokens":1,"MAX_TOKENS":2}`, opt: Options{DuplicateKeys: true}},
		{name: "case variants", in: `{"max_tokens":1,"MAX_TOKENS":2}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 16},
		{name: "exact repeat is still a duplicate", in: `{"n":1,"n":2}`, opt: Options{FoldCase: true}, reason: DuplicateKey, offset: 7},
		{name: "escaped case variant", in: `{"model":"a","\u004dodel":"b"}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 13},
		{name: "Kelvin sign", in: `{"max_tokens":1,"max_to\u212aens":2}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 16},
		{name: "long s", in: `{"stream":false,"ſtream":true}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 16},
		{name: "dotted capital I", in: `{"input":"a","İnput":"b"}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 13},
		{name: "non-ASCII case variants", in: `{"été":1,"ÉTÉ":2}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 11},
		{name: "nested case variants", in: `{"messages":[{"role":"user","Role":"system"}]}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: 28},
		{name: "different keys pass", in: `{"a":1,"b":2,"ab":3,"a_":4,"é":5,"e":6}`, opt: Options{FoldCase: true}},
		{name: "many keys, case variant late", in: `{` + keys(1000) + `,"K17":0}`, opt: Options{FoldCase: true}, reason: CaseVariantKey, offset: len(keys(1000)) + 1 + 1},
	} {
		err := Check([]byte(tc.in), tc.opt)
		if ReasonOf(err) != tc.reason {
			t.Errorf("%s: %v, want reason %v", tc.name, err, tc.reason)
			continue
		}
		if tc.reason == OK {
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %T is not *Error", tc.name, err)
			continue
		}
		// An object of many keys reports its repeated key at its end.
		if tc.offset != 0 && e.Offset != tc.offset || tc.offset == 0 && tc.reason == DuplicateKey && e.Offset == 0 {
			t.Errorf("%s: offset %d, want %d (%v)", tc.name, e.Offset, tc.offset, err)
		}
		if !strings.HasPrefix(err.Error(), "jsonscan: ") {
			t.Errorf("%s: message %q", tc.name, err)
		}
	}
}

func keys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + itoa(i) + `":0`)
	}
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// TestCheckDeepFlat: a body of millions of brackets is refused at the
// limit's bracket without recursion and without allocating.
func TestCheckDeepFlat(t *testing.T) {
	body := bytes.Repeat([]byte("["), 6<<20)
	allocs := testing.AllocsPerRun(5, func() {
		err := Check(body, Options{})
		if e, ok := err.(*Error); !ok || e.Reason != TooDeep || e.Offset != DefaultMaxDepth {
			t.Fatalf("got %v", err)
		}
	})
	// The *Error, plus a scanner when the pool is empty (the race detector
	// drops pooled items at random): a constant, whatever the input's size.
	if allocs > 6 {
		t.Errorf("%v allocations, want at most 6", allocs)
	}
	// With no limit the whole input is scanned, flat: one bit per level.
	if r := ReasonOf(Check(body, Options{MaxDepth: -1})); r != Truncated {
		t.Errorf("unlimited: %v, want truncated", r)
	}
}

// refDepth is the nesting depth of a valid JSON text: the most brackets
// open at once outside strings.
func refDepth(b []byte) int {
	d, most, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			d++
			most = max(most, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return most
}

// refDuplicate reports whether a valid JSON text has an object naming a
// key twice, as encoding/json unescapes keys.
func refDuplicate(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				// The object was a value: a key comes next in an
				// enclosing object.
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].expect = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
			continue
		case '[':
			stack = append(stack, &frame{})
			continue
		case ']', '}':
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"\u00e9\ud83d\ude00"}`, `[[[[[]]]]]`, `{"a":1,"a":2}`, `{"\ud800":1,"\udfff":2}`,
		`-0.5e-10`, `"\u12"`, `[1,]`, `{} x`, " \n", `[01]`, `{"a" 1}`, "\"\x7f\xff\"", `tru`, `{"k":{"k":{}}}`,
		strings.Repeat(`[{"x":`, 70) + "0" + strings.Repeat(`}]`, 70),
		`{"max_tokens":1,"MAX_TOKENS":2}`, `{"a":{"ſ":1,"S":2}}`, "\xef\xbb\xbf{}", "{\x00}\x00", `{"\u004b":1,"\u212a":2}`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		err := Check(b, Options{MaxDepth: -1})
		// encoding/json.Valid refuses nesting past 10000 levels.
		if want := json.Valid(b); (err == nil) != want && refDepth(b) <= 10000 {
			t.Fatalf("Check %q: %v, encoding/json.Valid says %v", b, err, want)
		}
		if err != nil {
			if r := ReasonOf(Check(b, Options{MaxDepth: int(limit) + 1})); r == OK {
				t.Fatalf("%q invalid without a limit, valid with one", b)
			}
			return
		}
		d := refDepth(b)
		lim := int(limit) + 1
		got := Check(b, Options{MaxDepth: lim})
		if want := d > lim; (ReasonOf(got) == TooDeep) != want || (got != nil) != want {
			t.Fatalf("%q: depth %d, limit %d: %v", b, d, lim, got)
		}
		// Options.UTF8 refuses exactly the valid JSON that is not UTF-8.
		strict := Check(b, Options{MaxDepth: -1, UTF8: true})
		if want := utf8.Valid(b); (strict == nil) != want || !want && ReasonOf(strict) != NotUTF8 {
			t.Fatalf("%q: UTF-8 check %v, utf8.Valid says %v", b, strict, want)
		}
		checkLayout(t, b)
		if utf8.Valid(b) && d <= 1000 {
			dup := Check(b, Options{MaxDepth: -1, DuplicateKeys: true})
			if want := refDuplicate(b); (ReasonOf(dup) == DuplicateKey) != want || (dup != nil) != want {
				t.Fatalf("%q: duplicate keys %v, encoding/json's keys say %v", b, dup, want)
			}
			folded := Check(b, Options{MaxDepth: -1, FoldCase: true})
			if want := refCaseVariant(b); dup == nil && ((ReasonOf(folded) == CaseVariantKey) != want || (folded != nil) != want) {
				t.Fatalf("%q: case variants %v, encoding/json's keys folded say %v", b, folded, want)
			}
			if dup != nil && folded == nil {
				t.Fatalf("%q: FoldCase passes what DuplicateKeys refuses (%v)", b, dup)
			}
		}
	})
}

// refCaseVariant reports whether a valid JSON text without repeated keys
// has an object holding two keys that fold alike, as encoding/json
// unescapes keys.
func refCaseVariant(b []byte) bool {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			seen := map[string]bool{}
			for k, x := range v {
				f := string(FoldKey(nil, []byte(k)))
				if seen[f] || walk(x) {
					return true
				}
				seen[f] = true
			}
		case []any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		}
		return false
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	return walk(v)
}

func BenchmarkCheck(b *testing.B) {
	prose := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("the quick brown fox jumps over the lazy dog. ", 20000) + `"}]}`)
	for _, c := range []struct {
		name string
		body []byte
		opt  Options
	}{
		{"prose", prose, Options{}},
		{"prose+dupkeys", prose, Options{DuplicateKeys: true}},
		{"prose+strict", prose, Options{FoldCase: true, UTF8: true}},
		{"cjk+strict", []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("日本語のテキストです。", 30000) + `"}]}`), Options{FoldCase: true, UTF8: true}},
		{"tiny-messages+dupkeys", []byte(`{"messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 30000) + `{}]}`), Options{DuplicateKeys: true}},
		{"tiny-messages+strict", []byte(`{"messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 30000) + `{}]}`), Options{FoldCase: true, UTF8: true}},
		{"big-object+dupkeys", []byte(`{` + keys(100000) + `}`), Options{DuplicateKeys: true}},
		{"deep-128", []byte("[" + strings.Repeat(deepDoc(127)+",", 2000) + "0]"), Options{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				err := Check(c.body, c.opt)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func deepDoc(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// checkLayout compares Options.Layout on the valid document b with
// encoding/json: the top-level object's keys and values in order, and the
// elements of its arrays.
func checkLayout(t *testing.T, b []byte) {
	t.Helper()
	var lay Layout
	if err := Check(b, Options{MaxDepth: -1, Layout: &lay}); err != nil {
		t.Fatalf("%q: Check with a layout: %v", b, err)
	}
	if lay.Dropped {
		if len(b) >= 16*(len(lay.Members)+len(lay.Elems))-256 && len(b) < 1<<31-1 {
			t.Fatalf("%q: layout dropped at %d entries for %d bytes", b, len(lay.Members)+len(lay.Elems), len(b))
		}
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		if len(lay.Members) != 0 || len(lay.Elems) != 0 {
			t.Fatalf("%q is not an object, but the layout holds %+v", b, lay)
		}
		return
	}
	i := 0
	for ; dec.More(); i++ {
		key, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if i >= len(lay.Members) {
			t.Fatalf("%q: layout has %d members, encoding/json reads more", b, len(lay.Members))
		}
		m := lay.Members[i]
		var gotKey string
		if err := json.Unmarshal(b[m.Key.Start:m.Key.End], &gotKey); err != nil || gotKey != key {
			t.Fatalf("%q: member %d key %q (%v), encoding/json %q", b, i, b[m.Key.Start:m.Key.End], err, key)
		}
		if got := b[m.Value.Start:m.Value.End]; !bytes.Equal(got, raw) {
			t.Fatalf("%q: member %d value %q, encoding/json %q", b, i, got, raw)
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			elems = nil
		}
		if int(m.Last-m.First) != len(elems) {
			t.Fatalf("%q: member %d has %d elements, encoding/json %d", b, i, m.Last-m.First, len(elems))
		}
		for j, e := range elems {
			sp := lay.Elems[int(m.First)+j]
			if got := bytes.TrimSpace(b[sp.Start:sp.End]); !bytes.Equal(got, bytes.TrimSpace(e)) || int(sp.End-sp.Start) != len(got) {
				t.Fatalf("%q: member %d element %d %q, encoding/json %q", b, i, j, b[sp.Start:sp.End], e)
			}
		}
	}
	if i != len(lay.Members) {
		t.Fatalf("%q: layout has %d members, encoding/json reads %d", b, len(lay.Members), i)
	}
}

func TestLayout(t *testing.T) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}, 3 ,"x",[1,[2]],{}],"n":1}`,
		` { "a" : [ ] , "b" : { "c" : [1,2] } , "d" : [ {"e":[0]} ] } `,
		`{}`, `[1,2]`, `"x"`, `{"k\u0041":"v","e":[[]]}`,
	} {
		checkLayout(t, []byte(s))
	}
}

// FuzzResume: a document that passed, cut just after an element of an
// array member and continued with any bytes, is checked from the cut
// (Options.Resume, the members before given) as a full scan checks it:
// the same error, or the same layout of what follows.
func FuzzResume(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"a":1},{"b":[2]}],"x":3}`), uint8(1), []byte(`,{"c":4}],"y":5}`))
	f.Add([]byte(`{"model":"m","messages":[{"a":1},{"b":[2]}]}`), uint8(0), []byte(`],"model":"n"}`))
	f.Add([]byte(`{"Model":"m","messages":[1,2,3]}`), uint8(2), []byte(`],"MODEL":1}`))
	f.Add([]byte(`{"m":[{"k":"v"}]}`), uint8(0), []byte(`,{"k":"\u00ff"}],"m":[]}`))
	f.Fuzz(func(t *testing.T, doc []byte, pick uint8, tail []byte) {
		opts := Options{MaxDepth: 8, FoldCase: true, UTF8: true}
		var first Layout
		o := opts
		o.Layout = &first
		if Check(doc, o) != nil || len(first.Elems) == 0 {
			return
		}
		// The member holding the picked element, and the cut after it.
		e := int(pick) % len(first.Elems)
		at := -1
		for i, m := range first.Members {
			if int(m.First) <= e && e < int(m.Last) {
				at = i
			}
		}
		k := int(first.Elems[e].End)
		b := append(append([]byte(nil), doc[:k]...), tail...)
		var full, resumed Layout
		o.Layout = &full
		wantErr := Check(b, o)
		resumed.Members = append(resumed.Members, first.Members[:at+1]...)
		o.Layout, o.Resume = &resumed, k
		gotErr := Check(b, o)
		if (wantErr == nil) != (gotErr == nil) || wantErr != nil && *wantErr.(*Error) != *gotErr.(*Error) {
			t.Fatalf("%q resumed at %d: %v, full scan %v", b, k, gotErr, wantErr)
		}
		if wantErr != nil || full.Dropped || resumed.Dropped {
			return
		}
		if !resumed.Resumed {
			// A cut after a number (which the bytes after it could
			// lengthen) is not resumed: Check scans the whole and lays it
			// out as a full scan does.
			if !slices.Equal(resumed.Members, full.Members) || !slices.Equal(resumed.Elems, full.Elems) {
				t.Fatalf("%q, not resumed at %d: layout %+v, full scan %+v", b, k, resumed, full)
			}
			return
		}
		// The full layout less the elements before the cut.
		skip := int32(e + 1 - int(first.Members[at].First))
		if len(full.Members) != len(resumed.Members) {
			t.Fatalf("%q: %d members resumed, %d in full", b, len(resumed.Members), len(full.Members))
		}
		for i := range full.Members {
			fm, rm := full.Members[i], resumed.Members[i]
			if i == at {
				fm.First += skip
				if rm.Key != fm.Key || rm.Value != fm.Value {
					t.Fatalf("%q: member %d %+v resumed, %+v in full", b, i, rm, fm)
				}
				if got, want := resumed.Elems[rm.First:rm.Last], full.Elems[fm.First:fm.Last]; !slices.Equal(got, want) {
					t.Fatalf("%q: member %d elements %v resumed, %v in full", b, i, got, want)
				}
				continue
			}
			if i < at {
				if rm.Key != fm.Key || rm.Value != fm.Value {
					t.Fatalf("%q: member %d %+v resumed, %+v in full", b, i, rm, fm)
				}
				continue
			}
			if rm.Key != fm.Key || rm.Value != fm.Value || !slices.Equal(resumed.Elems[rm.First:rm.Last], full.Elems[fm.First:fm.Last]) {
				t.Fatalf("%q: member %d %+v resumed, %+v in full", b, i, rm, fm)
			}
		}
	})
}
