package weigher

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// fieldValueCases are values of every kind for the member k of f: scalars,
// and objects and arrays that hold a case variant of a field read below k
// (which checkMember must find), when there is one.
func fieldValueCases(f *fields, k string) []string {
	vals := []string{`"x"`, `1`, `null`, `true`, `{}`, `[]`, `{"a":1}`, `[{"a":1}]`}
	if sub, _ := f.lookup(k); sub != nil {
		for _, n := range sub.list {
			if v := strings.ToUpper(n.name); v != n.name {
				vals = append(vals, `{"`+v+`":1}`, `[{"`+v+`":1}]`, `[1,{"`+v+`":1}]`)
			}
		}
	}
	if f.each != nil {
		for _, n := range f.each.list {
			if v := strings.ToUpper(n.name); v != n.name {
				vals = append(vals, `{"`+v+`":1}`)
			}
		}
	}
	return vals
}

// fieldValueSameAsCheckMember fails t when fieldValue says the member k:
// v of f has nothing to check and checkMember, at any depth, finds
// something in it.
func fieldValueSameAsCheckMember(t *testing.T, f *fields, k, v string) {
	t.Helper()
	val := rawValue(v)
	if !fieldValue(k, val.Type, f) {
		return
	}
	var fold []byte
	for depth := range maxFieldsDepth + 2 {
		if key, field, ok := checkMember(k, val, elements{v: val, raw: true}, f, depth, nil, &fold); !ok {
			t.Fatalf("fields %d: fieldValue(%q: %s) = true, checkMember at depth %d finds %q (%q)", f.id, k, v, depth, key, field)
		}
	}
}

// TestFieldValueSameAsCheckMember: fieldValue never passes a member
// checkMember would refuse, for every field name of every fields value
// (and near misses), with values of every kind.
func TestFieldValueSameAsCheckMember(t *testing.T) {
	passed := 0
	for _, f := range allFields() {
		for _, k := range lookupKeys() {
			for _, v := range fieldValueCases(f, k) {
				fieldValueSameAsCheckMember(t, f, k, v)
				if fieldValue(k, rawValue(v).Type, f) {
					passed++
				}
			}
		}
	}
	if passed < 100 {
		t.Fatalf("fieldValue passed only %d members: the test shows little", passed)
	}
}

// FuzzFieldValueSameAsCheckMember: the same for the fuzzer's keys and
// values (those that pass the strict scan only: checkMember reads no
// other).
func FuzzFieldValueSameAsCheckMember(f *testing.F) {
	f.Add("content", `{"TYPE":"text"}`)
	f.Add("role", `"user"`)
	f.Add("tool_calls", `[{"FUNCTION":{}}]`)
	fs := allFields()
	f.Fuzz(func(t *testing.T, k, v string) {
		v = strings.TrimSpace(v)
		if v == "" || jsonscan.Check([]byte(v), jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
			return
		}
		for _, fl := range fs {
			fieldValueSameAsCheckMember(t, fl, k, v)
		}
	})
}
