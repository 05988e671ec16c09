package weigher

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// fieldsFromCases are top-level lists whose object elements the strict
// scan records the members of (jsonscan.Options.Fields): members before
// and after the list, elements that are not objects, empty objects,
// escaped keys, nested objects (whose members are not recorded apart), a
// second list after the first.
var fieldsFromCases = []string{
	`{"messages":[]}`,
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":"b","name":"x"}],"max_tokens":9}`,
	`{"messages":[{},{"role":"user"},{},"text",7,null,{"content":[{"type":"text","text":"t"}],"role":"user"}]}`,
	`{"messages":[{"ro\u006ce":"user","cont\"ent":"q"},[1,{"a":2}],{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}],"role":"assistant"}]}`,
	`{"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"}],"tools":[{"type":"function","function":{"name":"f"}}],"input":[{"role":"user","content":"other"}]}`,
	`{"a":{"b":{"c":1}},"messages":[{"x":{"y":{"z":[{"w":1}]}}},{"role":"user","content":"after"}]}`,
}

// TestFieldsFromSameAsFieldsOf: a walk of a top-level list's elements in
// order with fieldsFrom's cursor finds each element's members as
// fieldsOf's binary search does (none where it finds none), for every list
// of bodies whose scan recorded their members, and for the load
// benchmark's shape of body, new and grown.
func TestFieldsFromSameAsFieldsOf(t *testing.T) {
	bodies := slices.Clone(fieldsFromCases)
	long := `{"role":"user","content":"` + strings.Repeat("words and more words ", 8) + `"}`
	grown := `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"}`
	for i := range 6 {
		grown += "," + long
		if i%2 == 1 {
			grown += `,{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\": 1}"}}]}`
		}
		bodies = append(bodies, grown+`],"max_tokens":256}`)
	}
	walked := 0
	for _, body := range bodies {
		lay := new(jsonscan.Layout)
		if err := jsonscan.Check([]byte(body), jsonscan.Options{FoldCase: true, UTF8: true, Layout: lay, Fields: true}); err != nil || lay.Dropped {
			t.Fatalf("%s: not laid out: %v", body, err)
		}
		d := doc{body: body, lay: lay}
		for _, m := range lay.Members {
			next := 0
			for _, sp := range lay.Elems[m.First:m.Last] {
				want := d.fieldsOf(sp)
				var got laidMembers
				got, next = d.fieldsFrom(sp, next)
				if got.body != want.body || !slices.Equal(got.fields, want.fields) {
					t.Fatalf("%s, element %q: fieldsFrom %+v, fieldsOf %+v", body, body[sp.Start:sp.End], got, want)
				}
				walked += len(got.fields)
			}
		}
	}
	if walked == 0 {
		t.Fatal("no element's members were found: the cases check nothing")
	}
	// Without recorded members (a layout incomplete, or none), none.
	lay := &jsonscan.Layout{Fields: []jsonscan.Member{{Key: jsonscan.Span{Start: 1, End: 4}}}, FieldsDropped: true}
	d := doc{body: `{"ab":1}`, lay: lay}
	if got, next := d.fieldsFrom(jsonscan.Span{Start: 0, End: 8}, 0); got.fields != nil || next != 0 {
		t.Fatalf("fields dropped: %+v, next %d", got, next)
	}
	if got, next := (&doc{}).fieldsFrom(jsonscan.Span{Start: 0, End: 8}, 0); got.fields != nil || next != 0 {
		t.Fatalf("no layout: %+v, next %d", got, next)
	}
}
