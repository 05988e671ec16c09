package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/llmguard/llmguard/internal/suggest"
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
			name, inline, ok := yamlKey(f)
			switch {
			case !ok:
				continue
			case inline:
				walk(f.Type)
				names = append(names, m[f.Type.Name()]...)
				continue
			}
			names = append(names, name)
			walk(f.Type)
		}
		m[t.Name()] = names
	}
	walk(reflect.TypeFor[Config]())
	return m
}()

// yamlKey is how go.yaml.in/yaml/v3 maps struct field f: the key that sets
// it (its tag's name, else its lowercased name), or inline (its fields sit
// in the enclosing mapping); ok is false for a field YAML never sets (tag
// "-", or unexported: internal state such as Config.priceKeys).
func yamlKey(f reflect.StructField) (name string, inline, ok bool) {
	tag := strings.Split(f.Tag.Get("yaml"), ",")
	switch {
	case tag[0] == "-", !f.IsExported() && !f.Anonymous:
		return "", false, false
	case slices.Contains(tag[1:], "inline"):
		return "", true, true
	case tag[0] != "":
		return tag[0], false, true
	}
	return strings.ToLower(f.Name), false, true
}

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
	if field != "" && strings.Trim(field, "0123456789") == "" {
		// In a {…} mapping the comma of "rate: 1,000" ends the entry:
		// rate reads 1 and "000" is a key of its own (trial3).
		out += " (a number written with a thousands comma, such as 1,000, splits in two inside {…}: write 1000)"
	} else if guess := suggest.Closest(field, known); guess != "" {
		out += " (did you mean " + guess + "?)"
	}
	return out + "; this section takes: " + strings.Join(known, ", ")
}

// intFromString matches go.yaml.in/yaml/v3's message for a string where
// an integer field is: "line 2: cannot unmarshal !!str `1GiB` into int64".
var intFromString = regexp.MustCompile("^line (\\d+): cannot unmarshal !!str `(.*)` into u?int(?:8|16|32|64)?$")

// iecSize matches a size written with an IEC suffix: "1GiB", "512 MiB".
var iecSize = regexp.MustCompile(`^(\d+)\s*([KMGT])iB$`)

// explainIntField rewrites the decoder's message for a string given to
// an integer field, b being the YAML source: it names the field (the key
// on that line) and says that a whole number is wanted; for a *_bytes
// field, that it is a whole number of bytes with no size suffix, and, for
// an IEC size such as 1GiB, the number of bytes to write instead. Other
// messages, and lines it cannot read a key from, are returned as they are.
func explainIntField(msg string, b []byte) string {
	sub := intFromString.FindStringSubmatch(msg)
	if sub == nil {
		return msg
	}
	n, err := strconv.Atoi(sub[1])
	lines := strings.Split(string(b), "\n")
	if err != nil || n < 1 || n > len(lines) {
		return msg
	}
	key, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(lines[n-1]), "- "), ":")
	key = strings.TrimSpace(key)
	if !ok || key == "" || strings.ContainsAny(key, " \t{[\"'") {
		return msg
	}
	if !strings.HasSuffix(key, "_bytes") {
		return fmt.Sprintf("line %s: %s: `%s` is not a whole number", sub[1], key, sub[2])
	}
	out := fmt.Sprintf("line %s: %s: `%s` is not a whole number of bytes (size suffixes such as MiB or GiB are not read", sub[1], key, sub[2])
	if m := iecSize.FindStringSubmatch(sub[2]); m != nil {
		if v, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			shift := 10 * (strings.Index("KMGT", m[2]) + 1)
			if v <= math.MaxInt64>>shift {
				out += fmt.Sprintf("; write %d for %s", v<<shift, sub[2])
			}
		}
	}
	return out + ")"
}
