package spec

import "strconv"

// name returns names[i], or "unknown(i)" when i is out of range, so that a
// value outside its enum never prints as a valid name.
func name(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return "unknown(" + strconv.Itoa(i) + ")"
}

// index returns the position of s in names, or -1.
func index(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}
