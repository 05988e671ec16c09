package config

import (
	"errors"
	"strings"
	"testing"
)

// An unknown field is reported with its line, in YAML terms: the field,
// the known field it most likely meant, and what the section takes — not
// the Go type it failed to fit (new-user trial: "field api_key not found
// in type config.Upstream").
func TestUnknownFieldNamesWhatTheSectionTakes(t *testing.T) {
	_, err := Parse([]byte(`
upstreams:
  - {name: o, flavor: openai, base_url: "http://127.0.0.1:1", api_key: sk-real}
limits:
  - {name: a, scope: user, unit: tokens, rate: 1, per: 1s, burts: 3}
models:
  gpt-4o: {input_usd_per_mtok: 1, output_usd_per_mtok: 2, zzzzzz: 1}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	all := strings.Join(ce.Problems, "\n")
	for _, want := range []string{
		"line 3: unknown field api_key (did you mean api_key_env?); this section takes: name, flavor, base_url, api_key_env, no_key,",
		"line 5: unknown field burts (did you mean burst?); this section takes: name, scope, unit, rate, per, burst,",
		"line 7: unknown field zzzzzz; this section takes: ",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "config.") {
		t.Errorf("problems name a Go type:\n%s", all)
	}
}

// explainUnknownField leaves every other message as it is, and never
// panics, whatever the decoder's text holds (the field is the file's).
func FuzzExplainUnknownField(f *testing.F) {
	f.Add("line 7: field api_key not found in type config.Upstream")
	f.Add("line 1: field x not found in type config.Nope")
	f.Add("line 2: cannot unmarshal !!str `x` into int")
	f.Add("line 3: field " + strings.Repeat("a", 200) + " not found in type config.Limit")
	f.Fuzz(func(t *testing.T, msg string) {
		out := explainUnknownField(msg)
		if unknownField.FindStringSubmatch(msg) == nil && out != msg {
			t.Fatalf("%q rewritten to %q", msg, out)
		}
	})
}
