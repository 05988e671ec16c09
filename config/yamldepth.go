package config

import "fmt"

// maxYAMLFlowDepth bounds the nesting of YAML flow collections ([…], {…})
// in a config file. goccy/go-yaml parses them recursively and in time that
// grows faster than the input (10,000 levels take about a second, 100,000
// half a minute), so the file is scanned flat first. Real configs nest
// flow collections two or three levels deep.
const maxYAMLFlowDepth = 128

// checkFlowDepth scans a YAML document flat and fails when more than limit
// flow collections are open at once: it counts '[' and '{' against ']' and
// '}' outside quoted scalars and comments. A bracket inside a plain scalar
// counts too (an unbalanced "a[" in a value adds one level), so the count
// bounds the real nesting from above. The error names the line.
func checkFlowDepth(b []byte, limit int) error {
	depth, line := 0, 1
	prev := byte('\n') // last non-blank byte before i on this line; '\n' at its start
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case '\n':
			line++
			prev = '\n'
			continue
		case ' ', '\t', '\r':
			continue
		case '#':
			// A comment starts at a line's start or after a blank.
			if i == 0 || b[i-1] == ' ' || b[i-1] == '\t' || b[i-1] == '\n' || b[i-1] == '\r' {
				for i+1 < len(b) && b[i+1] != '\n' {
					i++
				}
				continue
			}
		case '\'', '"':
			// A quote opens a quoted scalar only where a scalar may start.
			if prev == '\n' || prev == ':' || prev == '-' || prev == ',' || prev == '[' || prev == '{' || prev == '?' {
				i = skipQuoted(b, i, &line)
				prev = c
				continue
			}
		case '[', '{':
			depth++
			if depth > limit {
				return fmt.Errorf("line %d: flow collections ([…], {…}) nested deeper than %d levels", line, limit)
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
		prev = c
	}
	return nil
}

// skipQuoted returns the offset of the quote closing the quoted scalar
// opened at b[i] (a doubled single quote escapes one, a backslash escapes in double
// quotes), or the last offset when it is not closed; it counts the lines
// it crosses.
func skipQuoted(b []byte, i int, line *int) int {
	q := b[i]
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\n':
			*line++
		case '\\':
			if q == '"' && i+1 < len(b) {
				i++
				if b[i] == '\n' {
					*line++
				}
			}
		case q:
			if q == '\'' && i+1 < len(b) && b[i+1] == '\'' {
				i++
				continue
			}
			return i
		}
	}
	return len(b) - 1
}
