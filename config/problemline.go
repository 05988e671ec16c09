package config

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lineOfPath is the line (1-based) in the document root of the field a
// validation problem names by path ("store.backend", "limits[2].name",
// "models.gpt-4.1.input": a mapping key may hold dots, so the longest key
// that the path continues is taken). A field not written in the file (a
// default, or a required field left out) gets the line of the deepest part
// of its path that is written: limits[2]'s first line for a missing
// limits[2].name. 0 when not even the first part is written.
func lineOfPath(root *yaml.Node, path string) int {
	n := root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for n != nil && path != "" {
		switch {
		case strings.HasPrefix(path, "["):
			end := strings.IndexByte(path, ']')
			if end < 0 || n.Kind != yaml.SequenceNode {
				return line
			}
			i, err := strconv.Atoi(path[1:end])
			if err != nil || i < 0 || i >= len(n.Content) {
				return line
			}
			n, path = n.Content[i], path[end+1:]
		case n.Kind == yaml.MappingNode:
			path = strings.TrimPrefix(path, ".")
			var next *yaml.Node
			rest := ""
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				r, ok := strings.CutPrefix(path, k)
				if !ok || r != "" && r[0] != '.' && r[0] != '[' {
					continue
				}
				if next == nil || len(r) < len(rest) { // the longest key wins
					next, rest = n.Content[i+1], r
					line = n.Content[i].Line
				}
			}
			if next == nil {
				return line
			}
			n, path = next, rest
			continue
		default:
			return line
		}
		line = n.Line
	}
	return line
}

// withLine is problem ("path: message", as Validate words it) with
// "line N: " before it, N the line of its path in root (lineOfPath); a
// problem whose path is not in the file, or that names its line already,
// or a nil root, leaves it as it is.
func withLine(problem string, root *yaml.Node) string {
	if root == nil || strings.HasPrefix(problem, "line ") {
		return problem
	}
	path, _, ok := strings.Cut(problem, ": ")
	if !ok || strings.ContainsAny(path, " ") {
		return problem
	}
	if line := lineOfPath(root, path); line > 0 {
		return "line " + strconv.Itoa(line) + ": " + problem
	}
	return problem
}

// noLine is problemLine's answer for a problem that names no line: it sorts
// after every line.
const noLine = math.MaxInt

// problemLine is the line a problem names in its "line N: " prefix (as
// withLine and the YAML library write it), N a whole number from 1 without
// leading zeros and at most 9 digits; noLine for any other problem.
func problemLine(problem string) int {
	rest, ok := strings.CutPrefix(problem, "line ")
	digits, _, ok2 := strings.Cut(rest, ": ")
	if !ok || !ok2 || len(digits) == 0 || len(digits) > 9 || digits[0] == '0' {
		return noLine
	}
	n := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return noLine
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// byLine orders problems by the line each names (problemLine), top of the
// file first, keeping the order of those on one line and putting those
// that name no line (a field the file lacks entirely) last: an operator
// fixes a file from the top (trial11: validate listed lines 3, 8, 10, 12,
// 9, 14, 2, 11, the decoder's problems before the validator's).
func byLine(problems []string) {
	slices.SortStableFunc(problems, func(a, b string) int { return cmp.Compare(problemLine(a), problemLine(b)) })
}
