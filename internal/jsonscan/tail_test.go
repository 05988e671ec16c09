package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// fakeTail vouches for whatever follows the resumed array, with the
// members a full check of the document found there (members; nil: it
// vouches for nothing): a KnownTail that trusts its caller, as the
// weigher's does once a hash holds.
type fakeTail struct {
	members []Member
	asked   int
}

func (f *fakeTail) Tail(at int) []Member {
	f.asked++
	return f.members
}

// TestTailVouchedSameAsScanned: a resumed check whose tail (the members
// after the resumed array) is vouched finds the members a full check
// finds, spans shifted to the body; one whose tail is not vouched finds
// what a full check finds: the same error, at the same offset, for a key
// after the array that repeats one before it (as written, escaped, in
// another case, past an object's first 16 keys), whose keys the
// resumed scan adds to the duplicate-key check only when the array
// closes.
func TestTailVouchedSameAsScanned(t *testing.T) {
	many := ""
	for i := range 20 {
		many += fmt.Sprintf(`,"k%d":%d`, i, i)
	}
	tools := `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	cases := []struct{ name, before, tail string }{
		{"plain", `"model":"m",`, tools + `,"max_tokens":256 }  `},
		{"a key repeated", `"model":"m",`, tools + `,"model":"n"}`},
		{"a key repeated, escaped", `"model":"m",`, tools + `,"mod\u0065l":"n"}`},
		{"a key in another case", `"model":"m",`, tools + `,"Model":"n"}`},
		{"the array's key repeated", `"model":"m",`, tools + `,"messages":1}`},
		{"a key repeated past 16 keys", `"model":"m"` + many + `,`, tools + `,"k3":"n"}`},
		{"a key in another case past 16 keys", `"model":"m"` + many + `,`, tools + `,"K3":"n"}`},
		{"many keys, none repeated", `"model":"m"` + many + `,`, tools + `,"z":"n"}`},
		{"the tail's own keys past 16", `"model":"m",`, many + tools + `,"z":1}`},
		{"the tail's keys past 16 repeating one before", `"model":"m",`, many + tools + `,"MODEL":1}`},
		{"the tail's own key repeated", `"model":"m",`, tools + `,"z":1,"z":2}`},
	}
	for _, c := range cases {
		tailSameAsScanned(t, c.name, c.before, c.tail)
	}
}

// tailSameAsScanned checks the document {before"messages":[…]tail
// resumed after its first message against its full check: with its tail
// not vouched, the same error at the same offset, or the same members;
// and, when the full check passed, with its tail vouched (as a KnownTail
// vouches for a tail that followed the same members in a document that
// passed), the same members.
func tailSameAsScanned(t *testing.T, name, before, tail string) {
	t.Helper()
	doc := []byte(`{` + before + `"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]` + tail)
	k := len(`{` + before + `"messages":[{"role":"user","content":"a"}`) // after the first message
	opt := Options{MaxDepth: 8, FoldCase: true, UTF8: true}
	var full Layout
	fopt := opt
	fopt.Layout = &full
	want := Check(doc, fopt)
	// The members up to the array, as a checkpoint holds them (from a
	// full check of the same bytes up to its point; the array's value
	// only started).
	var pre Layout
	popt := opt
	popt.Layout = &pre
	prefix := []byte(`{` + before + `"messages":[{"role":"user","content":"a"}]}`)
	if err := Check(prefix, popt); err != nil {
		return
	}
	given := func() *Layout {
		lay := new(Layout)
		for i, m := range pre.Members {
			if i == len(pre.Members)-1 {
				m.Value.End = 0
			}
			lay.Members = append(lay.Members, Member{Key: m.Key, Value: m.Value})
		}
		return lay
	}
	// Not vouched: the tail is scanned, the given keys added when the
	// array closes.
	lay := given()
	ft := &fakeTail{}
	ropt := opt
	ropt.Layout, ropt.Resume, ropt.Tail = lay, k, ft
	got := Check(doc, ropt)
	if !lay.Resumed || ft.asked != 1 || lay.Tail != 0 {
		t.Fatalf("%s: resumed %v, tail asked %d times, %d vouched", name, lay.Resumed, ft.asked, lay.Tail)
	}
	var ge, we *Error
	errors.As(got, &ge)
	errors.As(want, &we)
	if (ge == nil) != (we == nil) || ge != nil && (ge.Reason != we.Reason || ge.Offset != we.Offset) {
		t.Errorf("%s: resumed %v, scanned %v", name, got, want)
		return
	}
	if want != nil {
		return // a document that never passed: no KnownTail vouches for its tail
	}
	sameMembers(t, name+" (scanned)", lay, &full)
	// Vouched: the tail's members as the full check found them.
	aend := bytes.Index(doc, []byte(`"b"}]`)) + 5 // after the array
	var vouched []Member
	for _, m := range full.Members[len(pre.Members):] {
		d := int32(aend)
		vouched = append(vouched, Member{Key: Span{m.Key.Start - d, m.Key.End - d}, Value: Span{m.Value.Start - d, m.Value.End - d}, Unlaid: doc[m.Value.Start] == '['})
	}
	lay = given()
	ft = &fakeTail{members: vouched}
	ropt.Layout, ropt.Tail = lay, ft
	if err := Check(doc, ropt); err != nil || ft.asked != 1 {
		t.Errorf("%s: vouched %v, tail asked %d times", name, err, ft.asked)
		return
	}
	if len(vouched) > 0 && !lay.Dropped && lay.Tail != len(vouched) {
		t.Errorf("%s: %d members vouched, want %d", name, lay.Tail, len(vouched))
	}
	sameMembers(t, name+" (vouched)", lay, &full)
}

// sameMembers checks that lay holds full's members (both complete).
func sameMembers(t *testing.T, name string, lay, full *Layout) {
	t.Helper()
	if full.Dropped || lay.Dropped {
		return
	}
	if len(lay.Members) != len(full.Members) {
		t.Errorf("%s: %d members, want %d", name, len(lay.Members), len(full.Members))
		return
	}
	for i, m := range lay.Members {
		if f := full.Members[i]; m.Key != f.Key || m.Value != f.Value {
			t.Errorf("%s: member %d at %v:%v, want %v:%v", name, i, m.Key, m.Value, f.Key, f.Value)
		}
	}
}

// FuzzTail is TestTailVouchedSameAsScanned on any members before the
// array and any tail.
func FuzzTail(f *testing.F) {
	f.Add(`"model":"m",`, `,"tools":[{"a":{"b":1}}],"max_tokens":256}`)
	f.Add(`"model":"m",`, `,"Model":1}`)
	f.Add(`"model":"m","k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,`, `,"k16":1}`)
	f.Add(`"model":"m",`, `,"x":[[[[[[1]]]]]]}`)
	f.Fuzz(func(t *testing.T, before, tail string) {
		tailSameAsScanned(t, "fuzz", before, tail)
	})
}
