package config

import (
	"errors"
	"reflect"
	"slices"
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

// The config's internal fields (set by parsing, not by the file: the
// price keys a models: entry writes, default_price's, the models written)
// cannot be set from YAML, and are neither suggested nor listed as what
// the section takes (new-user trial: "unknown field pricekeys (did you
// mean pricekeys?)").
func TestUnknownFieldHidesInternalFields(t *testing.T) {
	internal := []string{"pricekeys", "defaultpricekeys", "writtenmodels"}
	for _, f := range internal {
		_, err := Parse([]byte("upstreams:\n  - {name: o, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}\n" + f + ": 1\n"))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: 1: err = %v, want *Error (an internal field is no YAML field)", f, err)
		}
		all := strings.Join(ce.Problems, "\n")
		if !strings.Contains(all, "unknown field "+f) {
			t.Errorf("%s: 1: problems lack the unknown field:\n%s", f, all)
		}
		for _, name := range internal {
			if strings.Contains(all, "mean "+name+"?") || strings.Contains(all, " "+name+",") || strings.HasSuffix(all, " "+name) {
				t.Errorf("%s: 1: problems suggest or list internal field %s:\n%s", f, name, all)
			}
		}
	}
	// No section of any type lists one of its unexported fields.
	for typ, names := range yamlFields {
		t.Run(typ, func(t *testing.T) {
			st := structNamed(typ)
			if st == nil {
				t.Skipf("type %s not found from Config", typ)
			}
			for i := range st.NumField() {
				if f := st.Field(i); !f.IsExported() && slices.Contains(names, strings.ToLower(f.Name)) {
					t.Errorf("%s lists its unexported field %s", typ, f.Name)
				}
			}
		})
	}
	_, err := Parse([]byte("upstreams:\n  - {name: o, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}\npricekeys: {gpt-4o: [input_usd_per_mtok]}\n"))
	if err == nil {
		t.Errorf("pricekeys as a mapping was accepted")
	}
}

// structNamed finds the struct type of this package named name among those
// reachable from Config (through pointers, slices, maps and arrays).
func structNamed(name string) reflect.Type {
	seen := map[reflect.Type]bool{}
	var find func(t reflect.Type) reflect.Type
	find = func(t reflect.Type) reflect.Type {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Config]().PkgPath() || seen[t] {
			return nil
		}
		seen[t] = true
		if t.Name() == name {
			return t
		}
		for i := range t.NumField() {
			if r := find(t.Field(i).Type); r != nil {
				return r
			}
		}
		return nil
	}
	return find(reflect.TypeFor[Config]())
}

// A size written with a suffix where a *_bytes field wants bytes is
// reported with the field's name, "a whole number of bytes" and the number
// to write; another integer field, as not a whole number.
func TestIntFieldFromString(t *testing.T) {
	_, err := Parse([]byte("memory_limit_bytes: 1GiB\nmax_body_bytes: \"8 MiB\"\nmax_connections: lots\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"line 1: memory_limit_bytes: `1GiB` is not a whole number of bytes (size suffixes such as MiB or GiB are not read; write 1073741824 for 1GiB)",
		"line 2: max_body_bytes: `8 MiB` is not a whole number of bytes (size suffixes such as MiB or GiB are not read; write 8388608 for 8 MiB)",
		"line 3: max_connections: `lots` is not a whole number",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
}

// explainIntField never panics, keeps other messages as they are, and
// keeps the line of the ones it rewrites.
func FuzzExplainIntField(f *testing.F) {
	f.Add("line 1: cannot unmarshal !!str `1GiB` into int64", "memory_limit_bytes: 1GiB\n")
	f.Add("line 2: cannot unmarshal !!str `99999999999TiB` into int", "a: 1\n- x_bytes: 99999999999TiB")
	f.Add("line 9: cannot unmarshal !!str `x` into int64", "")
	f.Fuzz(func(t *testing.T, msg, src string) {
		out := explainIntField(msg, []byte(src))
		sub := intFromString.FindStringSubmatch(msg)
		if sub == nil && out != msg {
			t.Fatalf("rewrote %q to %q", msg, out)
		}
		if sub != nil && !strings.HasPrefix(out, "line "+sub[1]+": ") {
			t.Fatalf("%q lost its line: %q", msg, out)
		}
	})
}

// A thousands comma inside a {…} mapping splits the number: "rate: 1,000"
// reads rate 1 and a key "000". The unknown key says so (trial3: "unknown
// field 000" and the list of fields, nothing about the comma).
func TestThousandsCommaInFlowMapping(t *testing.T) {
	_, err := Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits: [{name: l, scope: user, unit: tokens, rate: 1,000, per: 1h}]\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: unknown field 000 (a number written with a thousands comma, such as 1,000, splits in two inside {…}: write 1000)") {
		t.Errorf("err = %v, want the thousands comma named", err)
	}
}
