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

// keyStopBytewise is keyStop as it was first written, a byte at a time:
// the reference keyStop's word search must agree with.
func keyStopBytewise(s string, i int) int {
	for i < len(s) && s[i] != '"' && s[i] != '\\' {
		i++
	}
	return i
}

// skipSpaceBytewise is skipSpace without its one-comparison filter.
func skipSpaceBytewise(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// sameStops fails t unless keyStop and skipSpace give what their bytewise
// references give from every offset of s.
func sameStops(t *testing.T, s string) {
	t.Helper()
	for i := 0; i <= len(s); i++ {
		if got, want := keyStop(s, i), keyStopBytewise(s, i); got != want {
			t.Fatalf("keyStop(%q, %d) = %d, bytewise %d", s, i, got, want)
		}
		if got, want := skipSpace(s, i), skipSpaceBytewise(s, i); got != want {
			t.Fatalf("skipSpace(%q, %d) = %d, bytewise %d", s, i, got, want)
		}
	}
}

// TestKeyStop: the word search finds the first quote or backslash at
// every place in a word and past the last whole word, with bytes that
// borrow (0x00, 0x01, 0x21, 0x5b, 0x5d, 0x80…) around it.
func TestKeyStop(t *testing.T) {
	for _, s := range []string{"", `"`, `\`, `abcdefg"`, `abcdefgh"`, `abcdefghijklmnop\"`, "\x00\x01\"#!\"", "[]\\\\\x80\xff\"",
		`prompt_tokens_details":{`, "\x21\x21\x21\x21\x21\x21\x21\x21\x22", "\x5b\x5b\x5b\x5b\x5b\x5b\x5b\x5c", " \t\r\n \t\r\n x"} {
		sameStops(t, s)
	}
	for pos := range 24 {
		for _, c := range []byte{'"', '\\'} {
			b := []byte("abcdefghijklmnopqrstuvwx")
			b[pos] = c
			sameStops(t, string(b))
		}
	}
}

// FuzzKeyStop is TestKeyStop on any input.
func FuzzKeyStop(f *testing.F) {
	f.Add("abc\"def")
	f.Add("\x01\x02\x03\x22\x5c\x5c\x80")
	f.Fuzz(func(t *testing.T, s string) { sameStops(t, s) })
}
