package proxy

import (
	"bytes"
	"testing"
)

// matchFieldLinear is the match removeFields made before fieldSet: every
// name compared with bytes.EqualFold, in order.
func matchFieldLinear(names []string, k []byte) string {
	for _, n := range names {
		if len(n) == len(k) && bytes.EqualFold([]byte(n), k) {
			return n
		}
	}
	return ""
}

// fieldSetLists are the lists removeFields matches against.
var fieldSetLists = [][]string{hopHeaders, passThroughDrop, virtualKeyDrop, nil,
	{"a", "A-b", "x-" + string(bytes.Repeat([]byte("y"), 70))}}

// TestFieldSetMatch: a fieldSet finds a name whatever the case it is
// written in, and nothing else, as the linear match does.
func TestFieldSetMatch(t *testing.T) {
	for _, c := range []struct {
		names []string
		k     string
		want  string
	}{
		{hopHeaders, "connection", "Connection"},
		{hopHeaders, "CONNECTION", "Connection"},
		{hopHeaders, "Connection", "Connection"},
		{hopHeaders, "user-agent", ""}, // Connection's length, another name
		{hopHeaders, "te", "Te"},
		{hopHeaders, "TE", "Te"},
		{hopHeaders, "tE", "Te"},
		{hopHeaders, "keep-alivE", "Keep-Alive"},
		{hopHeaders, "Keep-Alive ", ""},
		{hopHeaders, "", ""},
		{virtualKeyDrop, "authorization", "Authorization"},
		{virtualKeyDrop, "X-API-KEY", "x-api-key"},
		{virtualKeyDrop, "x-real-iP", "X-Real-IP"},
		{virtualKeyDrop, "content-length", ""}, // OpenAI-Project's length
		{virtualKeyDrop, "openai-project", "OpenAI-Project"},
		{virtualKeyDrop, "\u212aeep-alive", ""}, // the Kelvin sign folds to k
		{nil, "connection", ""},
		{fieldSetLists[4], "X-" + string(bytes.Repeat([]byte("Y"), 70)), fieldSetLists[4][2]},
	} {
		var s *fieldSet
		if c.names != nil {
			s = newFieldSet(c.names)
		}
		if got := s.match([]byte(c.k)); got != c.want {
			t.Errorf("match(%q): %q, want %q", c.k, got, c.want)
		}
		if got := matchFieldLinear(c.names, []byte(c.k)); got != c.want {
			t.Errorf("linear match(%q): %q, want %q (the case is wrong)", c.k, got, c.want)
		}
	}
	if got, want := newFieldSet(virtualKeyDrop).lengths(), lengthsOf(virtualKeyDrop); got != want {
		t.Errorf("lengths %b, want %b", got, want)
	}
	if (*fieldSet)(nil).lengths() != 0 {
		t.Error("a nil set has lengths")
	}
}

// lengthsOf is the set of the lengths of names below 64 bytes, as bits.
func lengthsOf(names []string) (set uint64) {
	for _, n := range names {
		if len(n) < 64 {
			set |= 1 << len(n)
		}
	}
	return set
}

// FuzzFieldSetMatch: for any field name, each list's fieldSet answers as
// the linear EqualFold match does.
func FuzzFieldSetMatch(f *testing.F) {
	for _, l := range fieldSetLists {
		for _, n := range l {
			f.Add([]byte(n))
			f.Add(bytes.ToLower([]byte(n)))
			f.Add(bytes.ToUpper([]byte(n)))
		}
	}
	f.Add([]byte("\u212aeep-alive"))
	f.Add([]byte("\u017fookie"))
	sets := make([]*fieldSet, len(fieldSetLists))
	for i, l := range fieldSetLists {
		sets[i] = newFieldSet(l)
	}
	f.Fuzz(func(t *testing.T, k []byte) {
		for i, l := range fieldSetLists {
			if got, want := sets[i].match(k), matchFieldLinear(l, k); got != want {
				t.Fatalf("list %d, %q: %q, want %q", i, k, got, want)
			}
		}
	})
}
