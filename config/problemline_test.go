package config

import (
	"errors"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Validation's problems name the line of the field at fault, as the
// strict decoder's do: an enum value out of its set, a model key holding
// dots (the longest key the path continues: not gpt-4's for gpt-4.1), a
// field left out of a list item (the item's line), and nothing for a field
// the file does not have at all. Before, only decode problems (unknown
// fields, wrong types) had a line.
func TestValidationProblemsNameTheirLine(t *testing.T) {
	doc := `listen: 127.0.0.1:8080
models:
  gpt-4:
    encoding: o200k_base
  gpt-4.1:
    encoding: o300k_base
limits:
  - name: ok
    scope: user
    unit: tokens
    rate: 10
    per: 1m
  - scope: planet
    unit: tokens
    rate: 10
    per: 1m
store:
  backend: memroy
`
	_, err := Parse([]byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want *Error", err)
	}
	for _, want := range []string{
		"line 6: models.gpt-4.1.encoding: ",
		"line 13: limits[1].name: ",
		"line 13: limits[1].scope: ",
		"line 18: store.backend: ",
		"upstreams: at least one upstream is required",
	} {
		if !slices.ContainsFunc(ce.Problems, func(p string) bool { return len(p) >= len(want) && p[:len(want)] == want }) {
			t.Errorf("no problem starting %q in:\n%q", want, ce.Problems)
		}
	}
}

// lineOfPath never panics and names a line of the document or 0, whatever
// the document and the path (paths come from Validate, documents from
// operators).
func FuzzLineOfPath(f *testing.F) {
	f.Add("a:\n  b: [1, {c: 2}]\n", "a.b[1].c")
	f.Add("models:\n  gpt-4.1: {x: 1}\n", "models.gpt-4.1.x")
	f.Add("- 1\n- 2\n", "[1]")
	f.Add("a: 1\n", "a[99999999999999999999]")
	f.Fuzz(func(t *testing.T, doc, path string) {
		var root yaml.Node
		if yaml.Unmarshal([]byte(doc), &root) != nil {
			return
		}
		lines := 1
		for _, c := range doc {
			if c == '\n' {
				lines++
			}
		}
		if l := lineOfPath(&root, path); l < 0 || l > lines {
			t.Fatalf("line %d of a %d-line document", l, lines)
		}
		withLine(path+": x", &root)
		withLine("x", &root)
	})
}
