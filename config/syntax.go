package config

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxSyntaxSearchBytes bounds the files whose syntax error's line
// syntaxProblem looks for (a binary search of some 20 parses of prefixes):
// a larger file gets the library's line as it is.
const maxSyntaxSearchBytes = 1 << 20

// libraryLine matches go.yaml.in/yaml/v3's "line N: problem" (after the
// "yaml: " prefix is cut).
var libraryLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// syntaxProblem turns go.yaml.in/yaml/v3's message for a file that is not
// YAML (msg, without its "yaml: " prefix) into one that names the line
// where the parser stopped, quotes it, and says what usually causes that
// problem.
//
// The library's own line is where the construct it was reading began (its
// "context mark": the first item of a list whose third item is
// mis-indented, one line before the mistake), not where it stopped
// (trial3: `did not find expected '-' indicator` named line 4, the list's
// `limits:` key, for a mistake on line 6). The line that stopped it is the
// shortest prefix of the file, in whole lines, that fails with the same
// problem: found by a binary search of prefixes (a prefix that ends before
// the mistake parses, or fails otherwise). A message without a line, or a
// file over maxSyntaxSearchBytes, keeps the library's line.
func syntaxProblem(msg string, b []byte) string {
	m := libraryLine.FindStringSubmatch(msg)
	if m == nil {
		return msg + syntaxHint(msg, "")
	}
	problem := m[2]
	line, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(b) <= maxSyntaxSearchBytes {
		sameProblem := func(n int) bool {
			var root yaml.Node
			err := yaml.Unmarshal(bytes.Join(lines[:n], nil), &root)
			if err == nil {
				return false
			}
			pm := libraryLine.FindStringSubmatch(strings.TrimPrefix(err.Error(), "yaml: "))
			return pm != nil && pm[2] == problem
		}
		if n := sort.Search(len(lines), func(i int) bool { return sameProblem(i + 1) }); n < len(lines) {
			line = n + 1
		}
	}
	text := ""
	if line >= 1 && line <= len(lines) {
		text = strings.TrimRight(string(lines[line-1]), "\r\n")
	}
	out := fmt.Sprintf("line %d: %s", line, problem)
	if q := redactLine(strings.TrimSpace(text)); q != "" {
		if len(q) > 80 {
			q = q[:80]
			for !utf8.ValidString(q) {
				q = q[:len(q)-1]
			}
			q += "…"
		}
		out += fmt.Sprintf(" (at `%s`)", q)
	}
	return out + syntaxHint(problem, text)
}

// redactLine is a line of the file as an error may quote it: whole, or,
// when it may hold a secret (a key, a password, a token, a URL's user
// part), only up to its first colon, since the error goes to the log and
// to /readyz (the start-up line masks a Redis URL's password likewise).
func redactLine(line string) string {
	if !secretOnLine.MatchString(line) {
		return line
	}
	if i := strings.IndexByte(line, ':'); i >= 0 {
		return line[:i+1] + " …"
	}
	return "…"
}

// secretOnLine matches a line that may hold a secret: a key named key,
// password, passwd, secret or token (api_key, x-api-key, …; not tokens or
// max_tokens), or a URL with a user part (redis://:password@host).
var secretOnLine = regexp.MustCompile(`(?i)(\w*(key|password|passwd|secret|token)|://[^\s/]*@)\b`)

// syntaxHint says what usually causes problem, one of go.yaml.in/yaml/v3's
// scanner and parser messages, on a line reading text; "" when it knows no
// likely cause.
func syntaxHint(problem, text string) string {
	switch {
	case strings.Contains(text, "\t") && strings.Contains(problem, "cannot start any token"):
		return ": YAML indents with spaces, never tabs"
	case strings.Contains(problem, "could not find expected ':'"):
		return ": a key needs a colon after it (`key: value`), and a text value holding `: ` or `#` needs quotes"
	case strings.Contains(problem, "did not find expected '-' indicator"),
		strings.Contains(problem, "did not find expected key"):
		return ": check this line's indentation against the lines above it: the items of one list, or the keys of one mapping, start in the same column"
	case strings.Contains(problem, "mapping values are not allowed in this context"):
		return ": this line is indented deeper than the key above it, or a text value holding `: ` needs quotes"
	case strings.Contains(problem, "did not find expected node content"):
		return ": a value is missing here (two commas in a row, a dangling `-`, or a comma after the last item of a […] or {…})"
	case strings.Contains(problem, "did not find expected ',' or"),
		strings.Contains(problem, "found unexpected end of stream"),
		strings.Contains(problem, "found unexpected end"):
		return ": a […], {…} or quoted text opened on this line or above is not closed, or two items lack the comma between them"
	case strings.Contains(problem, "found character that cannot start any token"):
		return ": a value starting with `@` or a backquote needs quotes"
	}
	return ""
}
