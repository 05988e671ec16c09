package weigher

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// sameWalk fails t unless rawMembers (memberWalk) gives, for the object b
// when it passes jsonscan, the keys and values gjson's ForEach gives, in
// order, and stops when told; and unless every object value's details
// walk ends where the value does.
func sameWalk(t *testing.T, b []byte) {
	t.Helper()
	if jsonscan.Check(b, jsonscan.Options{}) != nil {
		return
	}
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return
	}
	type kv struct{ k, raw string }
	var want, got []kv
	root.ForEach(func(k, v gjson.Result) bool {
		want = append(want, kv{k.Str, v.Raw})
		return true
	})
	rawMembers(root.Raw, func(k string, v gjson.Result) bool {
		got = append(got, kv{k, v.Raw})
		return true
	})
	if len(got) != len(want) {
		t.Fatalf("%q: %d members, gjson's ForEach %d", b, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%q: member %d is %q, gjson's ForEach %q", b, i, got[i], want[i])
		}
	}
	// The details walk steps over each value as value does.
	w, ref := newMemberWalk(root.Raw), newMemberWalk(root.Raw)
	for {
		_, more := w.key()
		ref.key()
		if !more {
			break
		}
		w.details("x")
		ref.value()
		if w.at() != ref.at() {
			t.Fatalf("%q: details walk at %d, value at %d", b, w.at(), ref.at())
		}
	}
	n := 0
	rawMembers(root.Raw, func(string, gjson.Result) bool { n++; return false })
	if n > 1 {
		t.Fatalf("%q: rawMembers went on after false", b)
	}
}

// TestRawMembersSameAsForEach: the member walk reads keys (escaped or
// not, with whitespace around) and values of every kind as gjson does.
func TestRawMembersSameAsForEach(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a" : "x\"y" , "b\\":[1,{"c":2}],"\u0063":{"d":{}},"e":null,"f":true,"g":-1.5e3}`,
		`{"k\"ey":1,"k\\":2,"\\":3,"":4}`, "{\n\t\"a\"\r: { \"b\" : [ ] } ,\n\"c\":\"\"}",
		`{"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":4},"x":{ }}`,
	} {
		sameWalk(t, []byte(s))
	}
}

// FuzzRawMembersSameAsForEach is TestRawMembersSameAsForEach on any input.
func FuzzRawMembersSameAsForEach(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"k\"ey":1,"k\\":2,"\\":3,"":4,"a":{"b":[{}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) { sameWalk(t, b) })
}
