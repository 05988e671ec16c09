package config

import (
	"github.com/llmguard/llmguard/internal/suggest"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// unknownField matches go.yaml.in/yaml/v3's message for a field the target
// struct lacks: "line 7: field api_key not found in type config.Upstream".
var unknownField = regexp.MustCompile(`^(line \d+: )field (\S+) not found in type config\.(\w+)$`)

// yamlFields maps the name of each struct type reachable from Config to
// its YAML field names, in declaration order: the fields the decoder sets
// (exported, not tagged "-"), never internal ones. Built once; read only.
var yamlFields = func() map[string][]string {
	m := map[string][]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		if _, seen := m[t.Name()]; seen {
			return
		}
		m[t.Name()] = nil
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")
			switch {
			case tag[0] == "-", !f.IsExported() && !f.Anonymous:
				// Not set from YAML: the decoder skips unexported
				// fields (internal state such as Config.priceKeys).
				continue
			case slices.Contains(tag[1:], "inline"):
				walk(f.Type)
				names = append(names, m[f.Type.Name()]...)
				continue
			case tag[0] != "":
				names = append(names, tag[0])
			default:
				names = append(names, strings.ToLower(f.Name))
			}
			walk(f.Type)
		}
		m[t.Name()] = names
	}
	walk(reflect.TypeFor[Config]())
	return m
}()

// explainUnknownField rewrites the YAML decoder's unknown-field message
// for a reader who knows the YAML, not the Go types: it keeps the line,
// names the field, suggests the known field it most likely meant (one
// that starts with it or that it starts with, or one edit away), and
// lists the fields the section takes. Other messages are returned as
// they are.
func explainUnknownField(msg string) string {
	sub := unknownField.FindStringSubmatch(msg)
	if sub == nil {
		return msg
	}
	line, field, typ := sub[1], sub[2], sub[3]
	known, ok := yamlFields[typ]
	if !ok || len(known) == 0 {
		return msg
	}
	out := line + "unknown field " + field
	if guess := suggest.Closest(field, known); guess != "" {
		out += " (did you mean " + guess + "?)"
	}
	return out + "; this section takes: " + strings.Join(known, ", ")
}
