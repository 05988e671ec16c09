package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// Validation accepts exactly the names package spec defines for scopes,
// units and flavors, and its message lists them all.
func TestValidateAcceptsExactlySpecNames(t *testing.T) {
	doc := func(flavor, scope, unit string) []byte {
		shape := "rate: 60, per: 1m"
		if unit == "concurrent" {
			shape = "max: 4"
		}
		return []byte(fmt.Sprintf(`
upstreams:
  - {name: up, flavor: %q, base_url: "http://127.0.0.1:1"}
limits:
  - {name: l, scope: %q, unit: %q, %s}
`, flavor, scope, unit, shape))
	}
	fields := []struct {
		field string
		names []string
		doc   func(s string) []byte
	}{
		{"upstreams[0].flavor", spec.FlavorNames(), func(s string) []byte { return doc(s, "key", "requests") }},
		{"limits[0].scope", spec.ScopeNames(), func(s string) []byte { return doc("openai", s, "requests") }},
		{"limits[0].unit", spec.UnitNames(), func(s string) []byte { return doc("openai", "key", s) }},
	}
	for _, f := range fields {
		for _, n := range f.names {
			if _, err := Parse(f.doc(n)); err != nil {
				t.Errorf("%s %q: %v", f.field, n, err)
			}
		}
		// Near misses of every name, and names that are not there at all.
		bad := []string{"", "unknown(0)", "bananas"}
		for _, n := range f.names {
			bad = append(bad, strings.ToUpper(n), n+"s", " "+n, n[:len(n)-1])
		}
		for _, b := range bad {
			_, err := Parse(f.doc(b))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("%s %q: err = %v, want *Error", f.field, b, err)
				continue
			}
			want := fmt.Sprintf("%s: must be one of %s (got %q)", f.field, strings.Join(f.names, ", "), b)
			if !strings.Contains(ce.Error(), want) {
				t.Errorf("%s %q: %v\nwant a problem %q", f.field, b, err, want)
			}
		}
	}
}

// Every model of the embedded price table states its largest input, which
// a request with hidden context (previous_response_id, a stored file)
// reserves: without it such a request would reserve a guess.
func TestEmbeddedPricesStateMaxInput(t *testing.T) {
	table, err := ParsePrices(DefaultPricesJSON)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range table {
		if m.MaxInputTokens < 4096 {
			t.Errorf("%s: max_input_tokens %d", name, m.MaxInputTokens)
		}
	}
	if table["gpt-4o"].MaxInputTokens != 128_000 || table["gpt-5"].MaxInputTokens != 272_000 {
		t.Errorf("gpt-4o %d, gpt-5 %d: want 128000 and 272000", table["gpt-4o"].MaxInputTokens, table["gpt-5"].MaxInputTokens)
	}
}
