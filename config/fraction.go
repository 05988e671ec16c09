package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// yamlUnmarshaler is the interface of a type that decodes its own YAML
// (Duration): its values are its own to judge.
var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// obsoleteUnmarshaler is go.yaml.in/yaml/v3's older form of it, which
// Duration implements.
var obsoleteUnmarshaler = reflect.TypeFor[interface {
	UnmarshalYAML(unmarshal func(any) error) error
}]()

// fractionsInWholeFields returns a problem for each value under root, the
// document's node, written as a number with a fraction ("1.5", "100.5",
// "2.5e0") where t's field at that place takes a whole number (an int or
// uint kind): go.yaml.in/yaml/v3 rounds such a value toward zero without
// a word (decode.go, a float into an int kind), so `max_connections:
// 100.5` ran as 100 and `max_body_bytes: 1.5` as 1. A float written whole
// ("1e3", "100.0") is left to the decoder, which reads it exactly. Types
// that decode their own YAML (Duration) and values of any other kind are
// not looked at. One walk over the document: linear in its size.
func fractionsInWholeFields(root *yaml.Node, t reflect.Type) []numberProblem {
	var out []numberProblem
	walkScalars(root, t, func(n *yaml.Node, t reflect.Type, path string) {
		if decodesItself(t) || !wholeKind(t.Kind()) || n.ShortTag() != "!!float" {
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err == nil && !math.IsInf(f, 0) && f == math.Trunc(f) {
			return
		}
		hint := ""
		if err == nil && !math.IsInf(f, 0) && math.Abs(f) < 1<<53 {
			hint = fmt.Sprintf(" (write %.0f or %.0f)", math.Floor(f)+0, math.Ceil(f)+0)
		}
		out = append(out, numberProblem{path: path, node: n,
			message: fmt.Sprintf("line %d: %s: `%s` is not a whole number%s", n.Line, path, n.Value, hint)})
	})
	return out
}

// durationType is Duration's type, whose scalars badDurations reads.
var durationType = reflect.TypeFor[Duration]()

// badDurations returns a problem for each scalar under root that sets a
// Duration field of t and is not a Go duration ("1hour", "30", "5 min"),
// naming its line, field path and value: Duration keeps only a marker of
// a bad value, so validation alone could say "not a Go duration" but not
// where or what was written (trial2). A null value (an empty `per:`) is
// left to validation, which reports what the field requires.
func badDurations(root *yaml.Node, t reflect.Type) []numberProblem {
	var out []numberProblem
	walkScalars(root, t, func(n *yaml.Node, t reflect.Type, path string) {
		if t != durationType || n.ShortTag() == "!!null" {
			return
		}
		if _, err := time.ParseDuration(n.Value); err == nil {
			return
		}
		want := "want e.g. 250ms, 1s, 1m, 24h"
		if d := durationFor(n.Value); d != "" {
			want = "write " + d + "; " + want
		}
		out = append(out, numberProblem{path: path, node: n,
			message: fmt.Sprintf("line %d: %s: `%s` is not a Go duration (%s)", n.Line, path, n.Value, want)})
	})
	return out
}

// walkScalars calls visit for each scalar under root, the document's node,
// that sets a field of t, with that field's type (pointers taken off) and
// its path ("limits[0].per"). It does not look inside the value of a type
// that decodes its own YAML (decodesItself), nor at values whose shape
// does not fit their field (a mapping where a number goes). Aliases are
// visited where their anchor is defined. One walk: linear in the document.
func walkScalars(root *yaml.Node, t reflect.Type, visit func(n *yaml.Node, t reflect.Type, path string)) {
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, t, path)
			}
		case yaml.AliasNode:
			// An alias's value is checked where it is defined.
		case yaml.MappingNode:
			if decodesItself(t) {
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				switch t.Kind() {
				case reflect.Map:
					walk(v, t.Elem(), p)
				case reflect.Struct:
					if ft, ok := yamlField(t, k.Value); ok {
						walk(v, ft, p)
					}
				}
			}
		case yaml.SequenceNode:
			if decodesItself(t) || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) {
				return
			}
			for i, c := range n.Content {
				walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode:
			visit(n, t, path)
		}
	}
	walk(root, t, "")
}

// decodesItself reports whether t (or a pointer to it) decodes its own
// YAML, in either of go.yaml.in/yaml/v3's interfaces.
func decodesItself(t reflect.Type) bool {
	return t.Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(yamlUnmarshaler) ||
		t.Implements(obsoleteUnmarshaler) || reflect.PointerTo(t).Implements(obsoleteUnmarshaler)
}

// wholeKind reports whether k is an integer kind.
func wholeKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// yamlField returns the type of struct t's field that YAML key name sets,
// looking into inlined structs (yamlKey).
func yamlField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		key, inline, ok := yamlKey(f)
		switch {
		case !ok:
		case inline:
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if got, found := yamlField(ft, name); found {
					return got, true
				}
			}
		case key == name:
			return f.Type, true
		}
	}
	return nil, false
}

// spelledDuration matches a duration written as a number and a unit word,
// or either alone: "30", "1 hour", "5min", "hour", "1.5 days".
var spelledDuration = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)?\s*([A-Za-z]*)\s*$`)

// durationUnits maps the unit words people write to a Go duration's unit
// and how many of it one is (a day is 24h: Go durations have no day).
var durationUnits = map[string]struct {
	unit string
	mult float64
}{
	"":   {"s", 1}, // a bare number: seconds, as most configs mean it
	"ms": {"ms", 1}, "msec": {"ms", 1}, "millisecond": {"ms", 1}, "milliseconds": {"ms", 1},
	"sec": {"s", 1}, "secs": {"s", 1}, "second": {"s", 1}, "seconds": {"s", 1},
	"min": {"m", 1}, "mins": {"m", 1}, "minute": {"m", 1}, "minutes": {"m", 1},
	"hr": {"h", 1}, "hrs": {"h", 1}, "hour": {"h", 1}, "hours": {"h", 1},
	"d": {"h", 24}, "day": {"h", 24}, "days": {"h", 24},
	"w": {"h", 168}, "wk": {"h", 168}, "week": {"h", 168}, "weeks": {"h", 168},
}

// durationFor is the Go duration a value that is not one most likely
// means ("30" → "30s", "1 hour" → "1h", "hour" → "1h", "2 days" → "48h"),
// or "" when it cannot tell (trial3: `30` and `hour` got only examples).
func durationFor(v string) string {
	lower := strings.ToLower(strings.TrimSpace(v))
	for _, article := range []string{"a ", "an "} {
		lower = strings.TrimPrefix(lower, article) // "a minute": one minute
	}
	m := spelledDuration.FindStringSubmatch(lower)
	if m == nil || (m[1] == "" && m[2] == "") {
		return ""
	}
	u, ok := durationUnits[m[2]]
	if !ok {
		return ""
	}
	n := 1.0
	if m[1] != "" {
		var err error
		if n, err = strconv.ParseFloat(m[1], 64); err != nil {
			return ""
		}
	}
	return strconv.FormatFloat(n*u.mult, 'f', -1, 64) + u.unit
}
