package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// wrongShape matches go.yaml.in/yaml/v3's message for a value of another
// shape than its field's: "line 4: cannot unmarshal !!map into
// []config.Limit" (a mapping where a list is), "line 3: cannot unmarshal
// !!str `sk-dev` into []config.Key" (text where a list is), "… !!seq into
// config.Store" (a list where a section is).
var wrongShape = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(map|seq|str|int|float|bool|null|timestamp)(?: `(.*)`)? into (\\[\\].+|map\\[.+|config\\.[A-Z][A-Za-z]*)$")

// scalarTypes are the config types written as one value, not a section:
// their messages are the number and duration explainers'.
var scalarTypes = map[string]bool{"config.Count": true, "config.Duration": true}

// explainShape rewrites the decoder's message for a value of the wrong
// shape (wrongShape) in YAML terms, given the document (root): it names the
// field by its path, the shape wanted (a list, or a mapping) and the one
// given, with how to write a list (`- ` items, or [a, b]); for a single
// value where a list of values is, the list to write ([gpt-4o]). It
// returns the message and the field's path, which validation then judges
// as absent (its word on it is moot); ok is false for other messages and
// when no value of that shape and type is on the line.
func explainShape(msg string, root *yaml.Node) (message, path string, ok bool) {
	sub := wrongShape.FindStringSubmatch(msg)
	if sub == nil || scalarTypes[sub[4]] {
		return "", "", false
	}
	line, err := strconv.Atoi(sub[1])
	if err != nil {
		return "", "", false
	}
	kind := yaml.ScalarNode
	got := "`" + sub[3] + "`"
	switch sub[2] {
	case "map":
		kind, got = yaml.MappingNode, "a mapping (name: value lines)"
	case "seq":
		kind, got = yaml.SequenceNode, "a list"
	}
	path, value := pathOnLine(root, reflect.TypeFor[Config](), line, kind, sub[4], sub[3])
	if path == "" {
		return "", "", false
	}
	if kind == yaml.ScalarNode {
		got = "`" + value + "`"
	}
	var want string
	switch target := sub[4]; {
	case strings.HasPrefix(target, "[]"):
		want = "must be a list"
		elem := strings.TrimPrefix(target, "[]")
		switch {
		case kind == yaml.ScalarNode && !strings.HasPrefix(elem, "config."):
			want += fmt.Sprintf(", got %s: write [%s]", got, value)
		case kind == yaml.ScalarNode:
			want += fmt.Sprintf(" of sections, got %s: start each item with `- ` on a line of its own, its fields indented under it", got)
		default:
			want += fmt.Sprintf(", got %s: start each item with `- ` (`- name: …`), or write [a, b]", got)
		}
	case strings.HasPrefix(target, "map["):
		want = fmt.Sprintf("must be a mapping (one `name: value` per line, or {name: value}), got %s", got)
	default:
		want = fmt.Sprintf("must be a section of fields (`field: value` lines indented under it), got %s", got)
	}
	return fmt.Sprintf("line %d: %s: %s", line, path, want), path, true
}

// pathOnLine returns the field path ("limits", "limits[0].models") and
// value of the first node under root, the document, of the given kind that
// starts on line and sets a field of Go type target ("[]config.Limit", as
// the decoder names it), t being the document's type; for a scalar, one
// reading value too (the decoder cuts a long value to its first bytes and
// "..."). The path is "" when there is none.
func pathOnLine(root *yaml.Node, t reflect.Type, line int, kind yaml.Kind, target, value string) (string, string) {
	prefix, cut := strings.CutSuffix(value, "...")
	var walk func(n *yaml.Node, t reflect.Type, path string) (string, string)
	walk = func(n *yaml.Node, t reflect.Type, path string) (string, string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if path != "" && n.Kind == kind && n.Line == line && t.String() == target &&
			(kind != yaml.ScalarNode || n.Value == value || cut && strings.HasPrefix(n.Value, prefix)) {
			return path, n.Value
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, v := walk(c, t, path); p != "" {
					return p, v
				}
			}
		case yaml.MappingNode:
			if decodesItself(t) {
				return "", ""
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				ft, ok := t, false
				switch t.Kind() {
				case reflect.Map:
					ft, ok = t.Elem(), true
				case reflect.Struct:
					ft, ok = yamlField(t, k.Value)
				}
				if !ok {
					continue
				}
				if p, v := walk(v, ft, p); p != "" {
					return p, v
				}
			}
		case yaml.SequenceNode:
			if decodesItself(t) || t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return "", ""
			}
			for i, c := range n.Content {
				if p, v := walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
					return p, v
				}
			}
		}
		return "", ""
	}
	return walk(root, t, "")
}
