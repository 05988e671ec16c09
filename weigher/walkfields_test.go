package weigher

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// checkFieldsAtMembers is checkFieldsAt without a cache as it was before
// walkFields: each object's members found by rawMembers (which steps over
// every value with Skip), each checked by checkMemberMembers, which walks
// into the value again. The reference walkFields is compared with.
func checkFieldsAtMembers(v gjson.Result, f *fields, depth int) (key, field string, ok bool) {
	if f == nil || depth > maxFieldsDepth {
		return "", "", true
	}
	if v.IsArray() {
		ok = true
		rawElements(v.Raw, func(e gjson.Result) bool {
			if e.IsObject() {
				key, field, ok = checkFieldsAtMembers(e, f, depth+1)
			}
			return ok
		})
		return key, field, ok
	}
	if !v.IsObject() {
		return "", "", true
	}
	ok = true
	var fold []byte
	rawMembers(v.Raw, func(k string, val gjson.Result) bool {
		key, field, ok = checkMemberMembers(k, val, f, depth, &fold)
		return ok
	})
	return key, field, ok
}

// checkMemberMembers is checkMember without a cache, for
// checkFieldsAtMembers.
func checkMemberMembers(k string, val gjson.Result, f *fields, depth int, fold *[]byte) (key, field string, ok bool) {
	if f.each != nil {
		return checkFieldsAtMembers(val, f.each, depth+1)
	}
	if sub, exact := f.lookup(k); exact {
		return checkFieldsAtMembers(val, sub, depth+1)
	}
	if jsonscan.Folded(k) {
		return "", "", true
	}
	*fold = jsonscan.FoldKey((*fold)[:0], []byte(k))
	if name, variant := f.folded[string(*fold)]; variant {
		return k, name, false
	}
	return "", "", true
}

// walkFieldsSets are the field sets the differential tests read values
// with, each at the depth its readers check it.
var walkFieldsSets = []struct {
	name  string
	f     *fields
	depth int
}{
	{"chat", chatFields, 0},
	{"tool", toolFields, 2},
	{"function", functionFields, 2},
	{"schema", schemaFields, 6},
	{"message", chatMessageFields, 2},
	{"responses", responsesFields, 0},
	{"messages", messagesFields, 0},
	{"claude block", claudeBlockFields, 3},
	{"near the limit", claudeBlockFields, maxFieldsDepth - 2},
}

// walkFieldsCases hold variants at every level a tool definition and a
// Claude block nest to, deep nesting past maxFieldsDepth, escaped keys,
// arrays of arrays (whose objects are not read) and scalars.
var walkFieldsCases = []string{
	`{}`, `[]`, `"x"`, `12`, `null`, `[{}, 1, "a", [{"Name":1}]]`,
	`{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"q":{"type":"string","description":"w"}}}}}`,
	`{"type":"function","function":{"name":"f","Description":"d"}}`,
	`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"TYPE":"string"}}}}}`,
	`{"type":"function","function":{"name":"f","parameters":{"Properties":{}}}}`,
	`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"items":{"properties":{"r":{"Enum":[1]}}}}}}}}`,
	`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"properties":{"r":{"properties":{"s":{"Type":1}}}}}}}}}`,
	`{"Type":"function"}`,
	`{"ty\u0070e":"function","N\u0041ME":"f"}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","Text":"x"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"URL":"x"}}]}]}`,
	`{"model":"m","messages":[[{"ROLE":"x"}],{"role":"user"},{"Role":"y"}]}`,
	`{"model":"m","tools":[{"function":{"parameters":{"properties":{"a":{"description":"x"},"b":{"DESCRIPTION":"y"}}}}}]}`,
	`{"model":"m","MODEL":"n"}`,
	`{"model":"m","response_format":{"JSON_schema":{}}}`,
	`{"a":{"b":{"c":{"Model":1}}},"Stream":true}`,
	`{"content":[{"type":"tool_result","content":[{"type":"text","content":[{"content":[{"Text":"deep"}]}]}]}]}`,
	`{"source":{"type":"content","content":[{"source":{"content":[{"TITLE":"t"}]}}]}}`,
	// From depth 3 (the set "claude block"), the innermost block of n is
	// at depth 3+2n: 10 and 11 lie on either side of maxFieldsDepth.
	deepBlocks(9, `"Text":"checked"`),
	deepBlocks(10, `"Text":"checked, at depth 23"`),
	deepBlocks(11, `"Text":"not read at depth 25"`),
	deepBlocks(12, `"Text":"not read"`),
	deepBlocks(30, `"Text":"far below the limit"`),
	` {"type" : "text" , "Text" : "spaced" } `,
	`{"type":"text","text":"a \" quote } ] and \\ backslash","Refusal":1}`,
}

// deepBlocks is n Claude content blocks nested in one another's
// "content", the innermost holding member.
func deepBlocks(n int, member string) string {
	return strings.Repeat(`{"type":"x","content":[`, n) + `{` + member + `}` + strings.Repeat(`]}`, n)
}

// sameWalkFields compares walkFields (through checkFieldsAt without a
// cache) with the rawMembers walk on the JSON text v with every field set,
// and checks that walkFields ends just past the value. It returns how many
// sets found a variant.
func sameWalkFields(t *testing.T, v string) (variants int) {
	t.Helper()
	raw := strings.TrimSpace(v)
	r := rawValue(raw)
	for _, set := range walkFieldsSets {
		key, field, ok := checkFieldsAt(r, set.f, set.depth, nil)
		wkey, wfield, wok := checkFieldsAtMembers(r, set.f, set.depth)
		if key != wkey || field != wfield || ok != wok {
			t.Fatalf("%s with %s fields: %q, %q, %v; the members walk says %q, %q, %v", raw, set.name, key, field, ok, wkey, wfield, wok)
		}
		if !ok {
			variants++
			continue
		}
		var fold []byte
		if end, _, _, _ := walkFields(v, skipSpace(v, 0), set.f, set.depth, &fold); end != len(strings.TrimRight(v, " \t\r\n")) {
			t.Fatalf("%s with %s fields: walkFields ends at %d of %d", raw, set.name, end, len(v))
		}
	}
	return variants
}

// TestWalkFieldsSameAsMembers: the one-pass field check names the same
// key (or none) as the walk that stepped over each value before walking
// into it, on variants at every depth, past the depth limit, escaped keys
// and values that hold quotes and brackets.
func TestWalkFieldsSameAsMembers(t *testing.T) {
	variants := 0
	for _, c := range walkFieldsCases {
		if err := jsonscan.Check([]byte(c), jsonscan.Options{MaxDepth: -1}); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		variants += sameWalkFields(t, c)
	}
	// Most cases hold a variant some set reads: the comparison is not of
	// two walks that find nothing.
	if variants < 20 {
		t.Errorf("%d variants found, want at least 20", variants)
	}
}

// FuzzWalkFieldsSameAsMembers: on any valid JSON value, the one-pass field
// check gives the answer of the members walk with every field set.
func FuzzWalkFieldsSameAsMembers(f *testing.F) {
	for _, c := range walkFieldsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 || jsonscan.Check(b, jsonscan.Options{MaxDepth: 512}) != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		sameWalkFields(t, string(b))
	})
}
