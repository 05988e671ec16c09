package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// numberFromScalar matches go.yaml.in/yaml/v3's message for a scalar of
// another type where a number field is: "line 4: cannot unmarshal !!str
// `10k` into float64", "… !!float `1.5` into int64", "… !!str `two` into
// config.Count" (Count is a whole number).
var numberFromScalar = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(str|float|bool|timestamp) `(.*)` into (float(?:32|64)|u?int(?:8|16|32|64)?|config\\.Count)$")

// numberHint patterns: a number with a thousands or millions suffix
// ("10k", "2M"), one with a dollar sign or thousands separators ("1.5$",
// "$500", "10,000"), and a percentage ("80%", for a fraction).
var (
	suffixedNumber = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*([kKmM])$`)
	dollarsOrComma = regexp.MustCompile(`^\$?\s*(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*\$?$`)
	percent        = regexp.MustCompile(`^(\d+(?:\.\d+)?)\s*%$`)
)

// numberProblem is a number field the strict pass could not decode: where
// it is and what to tell the reader.
type numberProblem struct {
	path    string     // its field path, e.g. "limits[0].rate"
	node    *yaml.Node // its value in the document
	message string     // "line 4: limits[0].rate: `10k` is not a number (…)"
}

// explainNumberField rewrites the decoder's message for a value given to a
// number field (msg) in YAML terms, given the document's values (ix): it
// names the field by its path (the value on that line with that text, the
// first not yet taken from ix, which it takes), says that a number (a whole number, for an
// integer field) is wanted, and, for a value with a suffix (10k, 2M), a
// dollar sign or thousands separators (1.5$, $500, 10,000) or a percent
// sign (80%: 0.8), the number to write instead; a *_bytes field keeps explainIntField's size advice.
// ok is false for other messages and for values it cannot find.
func explainNumberField(msg string, ix valueIndex) (p numberProblem, ok bool) {
	sub := numberFromScalar.FindStringSubmatch(msg)
	if sub == nil {
		return p, false
	}
	line, err := strconv.Atoi(sub[1])
	if err != nil {
		return p, false
	}
	v, found := ix.take(line, sub[3])
	if !found {
		return p, false
	}
	path, node := v.path, v.node
	whole := !strings.HasPrefix(sub[4], "float")
	field := path[strings.LastIndexAny(path, ".]")+1:]
	var text string
	switch {
	case whole && strings.HasSuffix(field, "_bytes") && sub[2] == "str":
		// explainIntField's message names the key; put the path in its place.
		text = strings.Replace(explainIntField(fmt.Sprintf("line %d: cannot unmarshal !!str `%s` into int64", line, sub[3]),
			[]byte(strings.Repeat("\n", line-1)+field+": "+sub[3])), "line "+sub[1]+": "+field+": ", "", 1)
	case sub[2] == "str" && quotedNumber(sub[3], whole):
		// "10000" in quotes: a number, but YAML text.
		text = fmt.Sprintf("`%s` is quoted, so YAML reads it as text, not a number (write %s, without quotes)", sub[3], sub[3])
	case whole:
		text = fmt.Sprintf("`%s` is not a whole number%s", sub[3], numberHint(sub[3], true))
	default:
		text = fmt.Sprintf("`%s` is not a number%s", sub[3], numberHint(sub[3], false))
	}
	return numberProblem{path: path, node: node, message: fmt.Sprintf("line %d: %s: %s", line, path, text)}, true
}

// quotedNumber reports whether v, text where a number goes, reads as one
// (a whole one for a whole field): YAML gave it as text only because it is
// quoted ("10000") or tagged.
func quotedNumber(v string, whole bool) bool {
	if whole {
		_, err := strconv.ParseInt(v, 10, 64)
		return err == nil
	}
	f, err := strconv.ParseFloat(v, 64)
	return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// numberHint is " (write …)" for a value whose number can be read off:
// one with a k or M suffix, a dollar sign or thousands separators, or a
// percentage (read as a fraction); else "". whole: the field takes whole
// numbers only.
func numberHint(v string, whole bool) string {
	const plain = "numbers take no suffix, unit or separator"
	var n float64
	if m := suffixedNumber.FindStringSubmatch(v); m != nil {
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return ""
		}
		n = f * 1e3
		if m[2] == "m" || m[2] == "M" {
			n = f * 1e6
		}
	} else if m := dollarsOrComma.FindStringSubmatch(v); m != nil && (strings.Contains(v, "$") || strings.Contains(v, ",")) {
		f, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", "")+m[2], 64)
		if err != nil {
			return ""
		}
		n = f
	} else if m := percent.FindStringSubmatch(v); m != nil {
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return ""
		}
		n = f / 100
	} else {
		return ""
	}
	if math.IsInf(n, 0) || (whole && n != math.Trunc(n)) {
		return " (" + plain + ")"
	}
	out := fmt.Sprintf(" (write %s for %s: %s", strconv.FormatFloat(n, 'f', -1, 64), v, plain)
	if strings.Contains(v, "$") {
		out += "; usd amounts are in dollars"
	}
	return out + ")"
}

// valueIndex holds a document's scalars that are a mapping's value or a
// sequence's element, by line and text, each with its field path
// ("limits[1].quota"), in document order. Built by indexValues in one walk.
type valueIndex map[lineValue][]located

type lineValue struct {
	line  int
	value string
}

type located struct {
	path string
	node *yaml.Node
}

// indexValues indexes the document under root (see valueIndex).
func indexValues(root *yaml.Node) valueIndex {
	ix := valueIndex{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode:
			if path != "" {
				k := lineValue{n.Line, n.Value}
				ix[k] = append(ix[k], located{path, n})
			}
		}
	}
	walk(root, "")
	return ix
}

// take returns the first value on line reading value that is not yet
// taken, and marks it taken; ok is false when there is none.
func (ix valueIndex) take(line int, value string) (located, bool) {
	k := lineValue{line, value}
	vs := ix[k]
	if len(vs) == 0 {
		return located{}, false
	}
	ix[k] = vs[1:]
	return vs[0], true
}

// concerns reports whether problem, a validation problem "<path>: …",
// is about the field at path or something under it.
func concerns(problem, path string) bool {
	rest, ok := strings.CutPrefix(problem, path)
	return ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "["))
}

// explainNumbers rewrites the strict pass's messages (errs) of number
// fields written as something else (explainNumberField), b being the YAML
// source, and decodes the document again into c with each such value
// read as 1, so that validation judges the rest of c as written rather
// than as if the field were missing (a quota of "1.5$" read as 0 made the
// limit a token bucket without rate or per). It returns those fields and
// the rewritten messages by their index in errs; with none it leaves c as
// it is.
func explainNumbers(errs []string, b []byte, c *Config) ([]numberProblem, map[int]string) {
	if !slices.ContainsFunc(errs, numberFromScalar.MatchString) {
		return nil, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, nil
	}
	var out []numberProblem
	explained := map[int]string{}
	ix := indexValues(&root)
	for i, e := range errs {
		p, ok := explainNumberField(e, ix)
		if !ok {
			continue
		}
		out = append(out, p)
		explained[i] = p.message
	}
	if len(out) == 0 {
		return nil, nil
	}
	for _, p := range out {
		p.node.Tag, p.node.Value, p.node.Style = "!!int", "1", 0
	}
	var again Config
	_ = root.Decode(&again) // the strict pass reported every error already
	*c = again
	return out, explained
}
