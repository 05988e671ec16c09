package config

import (
	"fmt"
	"math"
)

// maxYAMLFlowDepth bounds the nesting of YAML flow collections ([…], {…})
// in a config file. goccy/go-yaml parses them recursively and in time that
// grows faster than the input (10,000 levels take about a second, 100,000
// half a minute), so the file is scanned flat first. Real configs nest
// flow collections two or three levels deep.
const maxYAMLFlowDepth = 128

// maxYAMLEntries bounds the entries of a config file: its lines that hold
// more than blanks and a comment, plus the commas outside quoted scalars
// and comments (flow items). Parsing costs some hundreds of bytes of
// memory per node, far more than the file's bytes: `llmguard validate` of
// a 60 MB file of 10,000,000 one-line list items held 3.6 GB and had not
// finished after 2 minutes; of 1,000,000 (6 MB), 439 MB and 17 s (adv48),
// so a file under MaxFileBytes could still take a reload's process past
// its memory limit. A config of 10,000 keys in flow style ({key_sha256: …,
// user: …, tenant: …, plan: …} a line) is 40,000 entries and validates in
// 120 MB; more keys belong in the key store (key_store:), not the file.
const maxYAMLEntries = 250_000

// yamlLimits are the bounds scanYAML checks, each taken as given (0
// refuses any; math.MaxInt is no bound).
type yamlLimits struct {
	// FlowDepth: flow collections open at once.
	FlowDepth int
	// Entries: lines with content plus commas outside quoted scalars.
	Entries int
}

// configYAMLLimits are the bounds of a config file.
var configYAMLLimits = yamlLimits{FlowDepth: maxYAMLFlowDepth, Entries: maxYAMLEntries}

// checkFlowDepth scans a YAML document flat and fails when more than limit
// flow collections are open at once (scanYAML with no bound on entries).
func checkFlowDepth(b []byte, limit int) error {
	return scanYAML(b, yamlLimits{FlowDepth: limit, Entries: math.MaxInt})
}

// scanYAML scans a YAML document flat, before a parser sees it, and fails
// when more than lim.FlowDepth flow collections are open at once, or when
// it holds more than lim.Entries entries (see maxYAMLEntries). It counts
// '[' and '{' against ']' and '}' outside quoted scalars and comments. A
// bracket inside a plain scalar counts too (an unbalanced "a[" in a value
// adds one level), so the count bounds the real nesting from above; a
// comma in a plain scalar, or a line of a block scalar, counts as an entry,
// so entries bound the nodes from above too. The error names the line.
func scanYAML(b []byte, lim yamlLimits) error {
	depthLimit, entryLimit := lim.FlowDepth, lim.Entries
	depth, line, entries := 0, 1, 0
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
		}
		if prev == '\n' || c == ',' {
			if entries++; entries > entryLimit {
				return fmt.Errorf("line %d: more than %d entries (lines and flow items): a config file this large is not parsed; keep keys beyond a few tens of thousands in the key store (key_store:)", line, entryLimit)
			}
		}
		switch c {
		case '\'', '"':
			// A quote opens a quoted scalar only where a scalar may start.
			if prev == '\n' || prev == ':' || prev == '-' || prev == ',' || prev == '[' || prev == '{' || prev == '?' {
				i = skipQuoted(b, i, &line)
				prev = c
				continue
			}
		case '[', '{':
			depth++
			if depth > depthLimit {
				return fmt.Errorf("line %d: flow collections ([…], {…}) nested deeper than %d levels", line, depthLimit)
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
