package jsonscan

import (
	"runtime"
	"strings"
	"testing"
)

// refFields finds the members of the object element b[e.Start:e.End] of a
// document that passed Check, by stepping over keys and values with Skip:
// the reference Layout.Fields is tested against.
func refFields(b []byte, e Span) []Member {
	var ms []Member
	i := skipSpace(b, int(e.Start)+1)
	for i < int(e.End) && b[i] != '}' {
		k := Skip(b, i)
		v := skipSpace(b, skipSpace(b, k)+1) // past ':'
		ve := Skip(b, v)
		ms = append(ms, Member{Key: Span{int32(i), int32(k)}, Value: Span{int32(v), int32(ve)}})
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return ms
}

// sameFields fails t unless Check with Options.Fields gives b the verdict
// it gives without, and, when b passes, FieldsOf gives every object
// element of every top-level array its members as refFields finds them
// (ok false exactly when it has none).
func sameFields(t *testing.T, b []byte, opt Options) {
	t.Helper()
	lay := new(Layout)
	opt.Layout, opt.Fields = lay, true
	got := Check(b, opt)
	opt.Layout, opt.Fields = nil, false
	want := Check(b, opt)
	if ReasonOf(got) != ReasonOf(want) || got != nil && got.(*Error).Offset != want.(*Error).Offset {
		t.Fatalf("%q: %v with Fields, %v without", b, got, want)
	}
	if got != nil || lay.Dropped || lay.FieldsDropped {
		return
	}
	for _, m := range lay.Members {
		for _, e := range lay.Elems[m.First:m.Last] {
			fs, ok := lay.FieldsOf(e)
			if b[e.Start] != '{' {
				if ok {
					t.Fatalf("%q: element %q, not an object, has fields %v", b, b[e.Start:e.End], fs)
				}
				continue
			}
			ref := refFields(b, e)
			if ok != (len(ref) > 0) || len(fs) != len(ref) {
				t.Fatalf("%q: element %q: fields %v (%v), want %v", b, b[e.Start:e.End], fs, ok, ref)
			}
			for i := range fs {
				if fs[i] != ref[i] {
					t.Fatalf("%q: element %q: field %d is %v, want %v", b, b[e.Start:e.End], i, fs[i], ref[i])
				}
			}
		}
	}
}

// fieldCases are documents whose top-level arrays hold objects, nested,
// spaced, escaped, empty, mixed with other values.
var fieldCases = []string{
	`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}]}`,
	`{ "m" : [ { "a" : 1 , "b" : [ {"c":2} ] } , 3 , "x" , [ {"d":4} ] , { } , {"e":{"f":{"g":1}}} ] , "n" : {"o":[{"p":1}]} }`,
	`{"m":[{"k\u0061":"v\"","\\":true,"z":-1.5e3}],"t":[{"a":[]}, {"b":{}}]}`,
	`[{"a":1}]`, `{"a":{"b":[{"c":1}]}}`, `{"m":[{}]}`, `{"m":[{"a":1,"a":2}]}`, `{"m":[{"A":1,"a":2}]}`,
	`{"m":[{"a":1},{"b":2}],"m2":[{"c":3}]}`, `{"m":[{"a":1}`, `{"m":[{"a":}]}`,
}

// TestFieldsOf: Layout.Fields holds the members of the object elements of
// the top-level arrays as a walk of each finds them, and recording them
// changes no verdict, on the cases above cut short at every byte, with the
// options the weigher uses and without.
func TestFieldsOf(t *testing.T) {
	laid := 0
	for _, c := range fieldCases {
		for n := range len(c) + 1 {
			for _, opt := range []Options{{}, {FoldCase: true, UTF8: true}, {FoldCase: true, MaxDepth: 3}} {
				sameFields(t, []byte(c[:n]), opt)
			}
		}
		lay := new(Layout)
		if Check([]byte(c), Options{Layout: lay, Fields: true}) == nil && len(lay.Fields) > 0 {
			laid++
		}
	}
	if laid < 6 {
		t.Fatalf("only %d cases record fields", laid)
	}
}

// FuzzFields: any input gets the same verdict with Options.Fields as
// without, and, when it passes, the fields of refFields.
func FuzzFields(f *testing.F) {
	for _, c := range fieldCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameFields(t, b, Options{})
		sameFields(t, b, Options{FoldCase: true, UTF8: true})
		sameFields(t, b, Options{FoldCase: true, MaxDepth: 3})
	})
}

// TestFieldsBounded: a document of many small objects records at most
// MaxFields fields and says it dropped the rest, so that recording costs a
// bounded amount however many there are (32,768 two-member messages, a
// 1 MiB body, allocated 11 MB while Fields grew to 65,536 members; now
// 1.5 MB, most of it the layout's elements, which the scan lays out up to
// one per 16 bytes). The fields it keeps are the
// first ones, as refFields finds them.
func TestFieldsBounded(t *testing.T) {
	const n = 32768
	unit := `{"role":"user","content":"hi"}`
	b := []byte(`{"messages":[` + unit + strings.Repeat(","+unit, n-1) + `]}`)
	lay := new(Layout)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := Check(b, Options{Layout: lay, Fields: true}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(lay.Fields) > MaxFields || !lay.FieldsDropped {
		t.Errorf("%d fields recorded (dropped %v) for %d two-member objects, want at most %d and dropped",
			len(lay.Fields), lay.FieldsDropped, n, MaxFields)
	}
	if _, ok := lay.FieldsOf(lay.Elems[0]); ok {
		t.Error("FieldsOf answered from an incomplete record")
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, 2*uint64(len(b)); got > limit {
		t.Errorf("Check with Fields allocated %d bytes for a %d-byte document, want at most %d", got, len(b), limit)
	}
	if want := refFields(b, lay.Elems[0]); len(lay.Fields) < len(want) || lay.Fields[0] != want[0] || lay.Fields[1] != want[1] {
		t.Errorf("first fields %v, want %v", lay.Fields[:2], want)
	}
}
