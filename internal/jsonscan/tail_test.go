package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// fakeTail vouches for whatever follows the resumed array, with the
// members a full check of the bytes found there (tail): a KnownTail that
// trusts its caller, as the weigher's does once a hash holds.
type fakeTail struct {
	members []Member
	asked   int
}

func (f *fakeTail) Tail(at int) []Member {
	f.asked++
	return f.members
}

// TestTailVouchedSameAsScanned: a resumed check whose tail (the members
// after the resumed array) is vouched finds what a full check finds: the
// same error, at the same offset, for a key of the tail that repeats one
// before it (as written, escaped, in another case, past an object's first
// 16 keys), and the same members, spans shifted to the body, when none
// does.
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
		{"a key repeated past 16 keys", `"model":"m"` + many + `,`, tools + `,"k3":"n"}`},
		{"a key in another case past 16 keys", `"model":"m"` + many + `,`, tools + `,"K3":"n"}`},
		{"many keys, none repeated", `"model":"m"` + many + `,`, tools + `,"z":"n"}`},
		{"the tail's own keys past 16", `"model":"m",`, many + tools + `,"z":1}`},
		{"the tail's keys past 16 repeating one before", `"model":"m",`, many + tools + `,"MODEL":1}`},
	}
	for _, c := range cases {
		tailSameAsScanned(t, c.name, c.before, c.tail)
	}
}

// tailSameAsScanned checks the document {before"messages":[…]tail
// resumed after its first message with tail vouched (when tail passed
// after the same array in a document without before) against its full
// check: the same error at the same offset, or the same members.
func tailSameAsScanned(t *testing.T, name, before, tail string) {
	t.Helper()
	doc := []byte(`{` + before + `"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]` + tail)
	k := len(`{` + before + `"messages":[{"role":"user","content":"a"}`) // after the first message
	opt := Options{MaxDepth: 8, FoldCase: true, UTF8: true}
	var full Layout
	fopt := opt
	fopt.Layout = &full
	want := Check(doc, fopt)
	// The tail's members as a full check of a body where the tail
	// follows the same array without the earlier members finds them.
	alone := []byte(`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]` + tail)
	var al Layout
	aopt := opt
	aopt.Layout = &al
	if err := Check(alone, aopt); err != nil {
		return // a tail that never passed: no KnownTail vouches for it
	}
	aend := bytes.Index(alone, []byte(`"b"}]`)) + 5 // after the array
	var vouched []Member
	for _, m := range al.Members[1:] {
		d := int32(aend)
		vouched = append(vouched, Member{Key: Span{m.Key.Start - d, m.Key.End - d}, Value: Span{m.Value.Start - d, m.Value.End - d}, Unlaid: alone[m.Value.Start] == '['})
	}
	// The resumed check: the members up to the array, as a checkpoint
	// holds them (from a full check of the same bytes up to its point;
	// the array's value only started).
	var lay, pre Layout
	popt := opt
	popt.Layout = &pre
	prefix := []byte(`{` + before + `"messages":[{"role":"user","content":"a"}]}`)
	if err := Check(prefix, popt); err != nil {
		return
	}
	for i, m := range pre.Members {
		if i == len(pre.Members)-1 {
			m.Value.End = 0
		}
		lay.Members = append(lay.Members, Member{Key: m.Key, Value: m.Value})
	}
	ft := &fakeTail{members: vouched}
	ropt := opt
	ropt.Layout, ropt.Resume, ropt.Tail = &lay, k, ft
	got := Check(doc, ropt)
	if !lay.Resumed || ft.asked != 1 {
		t.Fatalf("%s: resumed %v, tail asked %d times", name, lay.Resumed, ft.asked)
	}
	var ge, we *Error
	errors.As(got, &ge)
	errors.As(want, &we)
	if (ge == nil) != (we == nil) || ge != nil && (ge.Reason != we.Reason || ge.Offset != we.Offset) {
		t.Errorf("%s: vouched %v, scanned %v", name, got, want)
		return
	}
	if want != nil {
		return
	}
	if full.Dropped || lay.Dropped {
		return
	}
	if lay.Tail != 0 && lay.Tail != len(vouched) || len(lay.Members) != len(full.Members) {
		t.Errorf("%s: %d members (tail %d), want %d (tail %d)", name, len(lay.Members), lay.Tail, len(full.Members), len(vouched))
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
