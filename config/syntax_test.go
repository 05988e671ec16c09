package config

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// syntaxBase is trial3's config, which each case breaks on one line.
const syntaxBase = `upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:8081", no_key: true}]
keys: [{key: sk-llmguard-dev, user: dev, tenant: dev-team}]
default_max_output_tokens: 512
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1000, per: 1h}
  - {name: team-daily, scope: tenant, unit: usd, quota: 1, period: day}
store: {backend: memory}
`

// TestSyntaxErrorNamesTheLineThatStoppedTheParser: a file that is not YAML
// is reported at the line where the parser stopped, quoted, with the usual
// cause. go.yaml.in/yaml/v3 names the line its enclosing construct began
// (trial3: "line 4: did not find expected '-' indicator", no quote, no
// hint, for a mis-indented line 6).
func TestSyntaxErrorNamesTheLineThatStoppedTheParser(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           string // the whole problem up to its hint
		hint           string
	}{
		{name: "mis-indented list item", old: "  - {name: team", new: "   - {name: team",
			want: "line 6: did not find expected '-' indicator (at `- {name: team-daily,", hint: "indentation"},
		{name: "doubled comma", old: "{name: user-tokens,", new: "{name: user-tokens,,",
			want: "line 5: did not find expected node content (at `- {name: user-tokens,,", hint: "two commas in a row"},
		{name: "key without colon", old: "limits:", new: "limits",
			want: "line 4: could not find expected ':' (at `limits`)", hint: "a key needs a colon"},
		{name: "unclosed flow mapping", old: "per: 1h}", new: "per: 1h",
			want: "line 5: did not find expected ',' or '}' (at `- {name: user-tokens,", hint: "is not closed"},
		{name: "tab indent", old: "default_max", new: "\tdefault_max",
			want: "line 3: found character that cannot start any token (at `default_max_output_tokens: 512`)", hint: "never tabs"},
		{name: "a line with a key is not quoted whole", old: "keys: [{key: sk-llmguard-dev,", new: "keys: [{key: sk-llmguard-dev,,",
			want: "line 2: did not find expected node content (at `keys: …`)", hint: "two commas"},
		{name: "a URL's password is not quoted", old: "store: {backend: memory}", new: "store: {backend: redis, redis_url: redis://:hunter2@x:6379/0",
			want: "line 7: did not find expected ',' or '}' (at `store: …`)", hint: "not closed"},
		{name: "key indented too deep", old: "store: {backend: memory}", new: "store:\n  backend: memory\n   nodes: 2",
			want: "line 9: mapping values are not allowed in this context (at `nodes: 2`)", hint: "indented deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(syntaxBase, tc.old) {
				t.Fatalf("case does not change the base: %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(syntaxBase, tc.old, tc.new, 1)))
			ce, ok := err.(*Error)
			if !ok || len(ce.Problems) != 1 {
				t.Fatalf("err = %v, want one problem", err)
			}
			p := ce.Problems[0]
			if !strings.HasPrefix(p, tc.want) || !strings.Contains(p, tc.hint) {
				t.Errorf("problem = %q\nwant it to start %q and hint %q", p, tc.want, tc.hint)
			}
		})
	}
}

// FuzzSyntaxProblem: for any file the library refuses as YAML, the line
// syntaxProblem names is one of the file's, and the search never panics.
func FuzzSyntaxProblem(f *testing.F) {
	f.Add([]byte(strings.Replace(syntaxBase, "  - {name: team", "   - {name: team", 1)))
	f.Add([]byte("a: [1,\nb: 2\n"))
	f.Add([]byte("a: 'x\n\n\n"))
	f.Add([]byte("\ta: 1"))
	lineOf := regexp.MustCompile(`^line (\d+): `)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		_, err := Parse(b)
		ce, ok := err.(*Error)
		if !ok || len(ce.Problems) != 1 {
			return
		}
		m := lineOf.FindStringSubmatch(ce.Problems[0])
		if m == nil {
			return
		}
		n, _ := strconv.Atoi(m[1])
		if lines := bytes.Count(b, []byte("\n")) + 1; n < 1 || n > lines {
			t.Fatalf("problem %q names line %d of a %d-line file", ce.Problems[0], n, lines)
		}
	})
}
