package spec

import "strconv"

// names is the table of an enum T: the config name of each value, indexed
// by it. Every enum of the package keeps one, and its String, Parse and
// Names methods are these three, so that no two enums spell the lookup
// apart. A value may have the empty name (PeriodNone): it prints as "" and
// no name parses to it.
type names[T ~uint8] []string

// of is v's name, or "unknown(<v>)" when v is past the table, so that a
// value outside its enum never prints as a valid name.
func (n names[T]) of(v T) string {
	if int(v) < len(n) {
		return n[v]
	}
	return "unknown(" + strconv.Itoa(int(v)) + ")"
}

// parse returns the value named s; false if none is (the empty s
// included).
func (n names[T]) parse(s string) (T, bool) {
	if s == "" {
		return 0, false
	}
	for i, v := range n {
		if v == s {
			return T(i), true
		}
	}
	return 0, false
}

// list returns the table's names in value order, the empty one left out
// (a fresh slice the caller may keep).
func (n names[T]) list() []string {
	out := make([]string, 0, len(n))
	for _, v := range n {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
