package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// checkedToolLists are tool lists whose field check fails or passes at
// every place countChecked checks: a variant key in a tool, in its
// function, its parameters, a property, nested properties and items; in
// values the count does not walk into (a function, parameters,
// properties or items of the wrong type, an array of objects where an
// object is read); below maxSchemaDepth, where the count stops and
// walkFields goes on; and below maxFieldsDepth, where walkFields stops.
var checkedToolLists = func() []string {
	deepProps := func(n int, leaf string) string {
		s := leaf
		for range n {
			s = `{"type":"object","properties":{"p":` + s + `}}`
		}
		return `[{"type":"function","function":{"name":"f","parameters":{"properties":{"p":` + s + `}}}}]`
	}
	deepItems := func(n int, leaf string) string {
		s := leaf
		for range n {
			s = `{"type":"array","items":{"properties":{"p":` + s + `}}}`
		}
		return `[{"type":"function","function":{"name":"f","parameters":{"properties":{"p":` + s + `}}}}]`
	}
	return []string{
		`[{"Type":"function","function":{"name":"f"}}]`,
		`[{"type":"function","Function":{"name":"f"}}]`,
		`[{"type":"function","function":{"NAME":"f"}}]`,
		`[{"type":"function","function":{"name":"f","Parameters":{}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"Properties":{}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"Type":"string"}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"type":"object","properties":{"b":{"DESCRIPTION":"x"}}}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"items":{"Properties":{}}}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"items":{"properties":{"b":{"Enum":[1]}}}}}}}}]`,
		// Values of the wrong type, which the count weighs as text.
		`[{"type":"function","function":[{"name":"f"},{"Name":"g"}]}]`,
		`[{"type":"function","function":{"name":"f","parameters":[{"Properties":{}}]}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":[{"a":{"Type":"x"}}]}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":[{"Type":"x"}]}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"items":[{"Properties":{}}]}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"properties":[{"b":{"Type":"x"}}]}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"enum":[{"Type":"x"}]}}}}}]`,
		`[{"name":"legacy","Description":"d","parameters":{"properties":{"a":{"type":"string"}}}}]`,
		`[{"name":"legacy","parameters":{"properties":{"a":{"type":"string"}}},"function":"x","Strict":1}]`,
		`[{"type":"function","function":{"name":"f"}},"s",1,[{"Type":"x"}],{"Type":"y"}]`,
		// Escaped keys, variants and not.
		`[{"type":"function","function":{"name":"f","parameters":{"\u0050roperties":{}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"\u0070roperties":{"a":{"\u0054ype":"x"}}}}}]`,
		// Deep schemas: the count stops below maxSchemaDepth, the check
		// below maxFieldsDepth.
		deepProps(maxSchemaDepth+1, `{"Type":"x"}`),
		deepProps(maxSchemaDepth+3, `{"Type":"x"}`),
		deepProps(maxSchemaDepth-1, `{"Type":"x"}`),
		deepProps(maxFieldsDepth, `{"Type":"x"}`),
		deepItems(maxSchemaDepth-2, `{"Type":"x"}`),
		deepItems(maxSchemaDepth+1, `{"Type":"x"}`),
		deepItems(maxFieldsDepth/3, `{"Type":"x"}`),
		deepItems(maxFieldsDepth/3-1, `{"Type":"x"}`),
		deepItems(maxFieldsDepth/3-2, `{"Type":"x"}`),
		deepItems(maxFieldsDepth/3-2, `{"type":"x"}`),
		deepProps(maxSchemaDepth+1, `{"type":"x"}`),
	}
}()

// toolsCheckRef is what countChecked must give for list read with elem:
// count's tokens, and checkWhole's verdict without a cache
// (checkElements at depth 1).
func toolsCheckRef(tc toolsCounter, list gjson.Result, elem *fields) (int64, bool) {
	_, _, ok := checkElements(elements{v: list, raw: true}, elem, 1, nil)
	return tc.count(list), ok
}

// TestToolsCountCheckedSameAsWalk: the count that checks the list's
// fields in its walk gives count's tokens and the field check's verdict
// on every shape, for both lists chat and Responses read whole.
func TestToolsCountCheckedSameAsWalk(t *testing.T) {
	w := testWeigher(t)
	tc := newToolsCounter(w.encoders[EncodingO200k], EncodingO200k)
	failed := 0
	for i, list := range append(append([]string{}, toolLists...), checkedToolLists...) {
		if err := jsonscan.Check([]byte(list), jsonscan.Options{FoldCase: true, UTF8: true, MaxDepth: 1000}); err != nil {
			t.Fatalf("list %d is not a valid tools list: %v", i, err)
		}
		v := gjson.Parse(list)
		for _, elem := range []*fields{toolFields, functionFields} {
			n, ok := tc.countChecked(v, elem)
			wantN, wantOK := toolsCheckRef(tc, v, elem)
			if n != wantN || ok != wantOK {
				t.Errorf("list %d %.120s: countChecked %d, %v; count and check %d, %v", i, list, n, ok, wantN, wantOK)
			}
			if !wantOK {
				failed++
			}
		}
	}
	if failed < 20 { // 26 when written
		t.Errorf("only %d lists fail the check: the table lost its variants", failed)
	}
}

// FuzzToolsCountCheckedSameAsWalk holds countChecked to count and the
// field check on any list that passes the request's scan.
func FuzzToolsCountCheckedSameAsWalk(f *testing.F) {
	for _, l := range append(append([]string{}, toolLists...), checkedToolLists...) {
		f.Add(l)
	}
	w := testWeigher(f)
	tc := newToolsCounter(w.encoders[EncodingO200k], EncodingO200k)
	f.Fuzz(func(t *testing.T, list string) {
		if jsonscan.Check([]byte(list), jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
			return
		}
		v := gjson.Parse(strings.TrimSpace(list))
		for _, elem := range []*fields{toolFields, functionFields} {
			n, ok := tc.countChecked(v, elem)
			if wantN, wantOK := toolsCheckRef(tc, v, elem); n != wantN || ok != wantOK {
				t.Errorf("%q: countChecked %d, %v; count and check %d, %v", list, n, ok, wantN, wantOK)
			}
		}
	})
}

// TestChatToolsCheckedInCount: a new tools list long enough to be cached
// (its check left to its count) is refused for a variant key as the
// walk's check refused it, with the key named in body order, whatever
// else the body holds after it or before it: a model named outside
// "model", another variant, a message with a variant; and a list that
// passes weighs the same cold, warm and plain.
func TestChatToolsCheckedInCount(t *testing.T) {
	pad := strings.Repeat("padding ", 12) // over minCachedBytes
	bad := `[{"type":"function","function":{"name":"f","description":"` + pad + `","parameters":{"properties":{"a":{"Type":"string"}}}}}]`
	good := strings.Replace(bad, `"Type"`, `"type"`, 1)
	for _, c := range []struct {
		name, body, detail string
		fault              Fault
	}{
		{"variant", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":` + bad + `}`, `key "Type"`, FaultCaseVariantKey},
		{"variant before messages", `{"model":"gpt-4o","tools":` + bad + `,"messages":[{"role":"user","content":"hi"}]}`, `key "Type"`, FaultCaseVariantKey},
		{"fallback model after", `{"model":"gpt-4o","messages":[],"tools":` + bad + `,"models":["gpt-4o-mini"]}`, `key "models"`, FaultModelOutsideBody},
		{"later variant", `{"model":"gpt-4o","messages":[],"tools":` + bad + `,"Max_Tokens":3}`, `key "Type"`, FaultCaseVariantKey},
		{"message variant after", `{"model":"gpt-4o","tools":` + bad + `,"messages":[{"role":"user","Content":"` + pad + `"}]}`, `key "Type"`, FaultCaseVariantKey},
		{"message variant before", `{"model":"gpt-4o","messages":[{"role":"user","Content":"` + pad + `"}],"tools":` + bad + `}`, `key "Content"`, FaultCaseVariantKey},
		{"passes", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":` + good + `}`, "", FaultNone},
		{"passes, model after", `{"messages":[{"role":"user","content":"hi"}],"tools":` + good + `,"model":"gpt-4"}`, "", FaultNone},
	} {
		// A fresh list for every case and run, so that the shared
		// cache has not seen it: the check is left to the count.
		body := strings.ReplaceAll(c.body, pad, pad+c.name)
		e := testWeigher(t).Chat([]byte(body))
		if e.Fault != c.fault || c.detail != "" && !strings.HasPrefix(e.FaultDetail, c.detail) {
			t.Errorf("%s: fault %v %q, want %v %q", c.name, e.Fault, e.FaultDetail, c.fault, c.detail)
		}
		sameAsPlain(t, KindChat, []byte(body))
	}
}
