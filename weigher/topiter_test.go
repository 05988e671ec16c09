package weigher

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// topIterSeeds are bodies whose members topIter and walk must give alike:
// escaped keys, arrays laid and not, scalars of every kind, whitespace.
var topIterSeeds = []string{
	`{}`, ` { } `, `{"a":1}`,
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}],"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":256}`,
	`{"a":1,"b":[2,3],"c":"x","b\u0032":{"d":4},"e":null,"f":true,"g":false,"h":-1.5e3}`,
	"{\n\t\"messages\" : [ {\"role\":\"user\"} , 1 , \"s\" , [ ] ] ,\r\n\"max_completion_tokens\" :\t7 }",
	`{"m\"x":[],"":[{}],"\\":"\u00e9","max_tokens":[1]}`,
}

// topIterSteps is what one walk of d gives: each member's key, value and
// elements (every field walk sets), as text to compare.
func walkSteps(d doc, raw bool) []string {
	var out []string
	d.walk(raw, func(k string, v gjson.Result, e elements) bool {
		out = append(out, stepText(k, v, e, e.remembered, e.at))
		return true
	})
	return out
}

// iterSteps is walkSteps by topIter, the elements built by its elements
// method, and remembered and at read by its shortcuts.
func iterSteps(d doc, raw bool) []string {
	var out []string
	it := d.topMembers(raw)
	for it.next() {
		e := it.elements(it.v)
		out = append(out, stepText(it.k, it.v, e, it.remembered(), it.at()))
	}
	return out
}

// stepText is one member as walkSteps records it.
func stepText(k string, v gjson.Result, e elements, remembered bool, at jsonscan.Span) string {
	return fmt.Sprintf("%q %d %q %q %v %d | %q %q %v %v %v %v %v %v %v", k, v.Type, v.Raw, v.Str, v.Num, v.Index,
		e.v.Raw, e.body, e.spans, e.laid, e.raw, e.at, e.remembered, remembered, at)
}

// sameIter fails t unless topIter gives what walk gives for body, when it
// passes the strict scan as a chat body is scanned: with the layout and
// without, raw and parsed, and with the layout's arrays marked Unlaid as a
// list the count cache vouched for is.
func sameIter(t *testing.T, body []byte) {
	t.Helper()
	lay := new(jsonscan.Layout)
	if jsonscan.Check(body, jsonscan.Options{MaxDepth: DefaultMaxDepth, FoldCase: true, UTF8: true, Layout: lay}) != nil {
		return
	}
	s := bodyString(body)
	root := gjson.Parse(bodyString(bytes.TrimSpace(body)))
	if !root.IsObject() {
		return
	}
	unlaid := &jsonscan.Layout{Members: slices.Clone(lay.Members), Elems: slices.Clone(lay.Elems), Dropped: lay.Dropped}
	for i := range unlaid.Members {
		if m := &unlaid.Members[i]; s[m.Value.Start] == '[' {
			m.Unlaid, m.First, m.Last = true, 0, 0
		}
	}
	docs := []doc{{root: root, body: s}}
	if !lay.Dropped {
		docs = append(docs, doc{root: root, body: s, lay: lay}, doc{root: root, body: s, lay: unlaid})
	}
	for i, d := range docs {
		for _, raw := range []bool{true, false} {
			if got, want := iterSteps(d, raw), walkSteps(d, raw); !slices.Equal(got, want) {
				t.Fatalf("%q doc %d raw %v:\ntopIter %q\nwalk    %q", body, i, raw, got, want)
			}
		}
	}
}

// TestTopIterSameAsWalk: chat's loop over the top-level members
// (topIter) reads each member as the callback walk gives it did.
func TestTopIterSameAsWalk(t *testing.T) {
	for _, s := range topIterSeeds {
		sameIter(t, []byte(s))
	}
	sameIter(t, []byte(`{"model":"gpt-4","messages":`+cookbookToolMessages+`,"tools":`+cookbookTools+`,"max_tokens":10,"n":2}`))
	for _, rb := range richBodies { // every kind's: the iterator reads any object
		sameIter(t, []byte(rb.body))
	}
}

// FuzzTopIterSameAsWalk is TestTopIterSameAsWalk on any input.
func FuzzTopIterSameAsWalk(f *testing.F) {
	for _, s := range topIterSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"model":"gpt-4","messages":` + cookbookToolMessages + `,"tools":` + cookbookTools + `}`))
	f.Fuzz(func(t *testing.T, b []byte) { sameIter(t, b) })
}
