package config

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestWrongShapeNamesTheFieldAndTheShape: a value of the wrong shape (a
// mapping or one value where a list goes, a list where a section or a
// mapping goes) was reported in the decoder's Go terms ("line 4: cannot
// unmarshal !!map into []config.Limit"), naming neither the field nor what
// to write (new-user trial); now its path, the shape wanted and given, and
// how to write it, and no moot word of validation on the field.
func TestWrongShapeNamesTheFieldAndTheShape(t *testing.T) {
	const up = "upstreams:\n  - {name: mock, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}\n"
	for _, tc := range []struct {
		name, yaml string
		want       string // the whole problem list, one per line
	}{
		{name: "a mapping for a list of sections", yaml: up + "limits:\n  user-tpm: {scope: user, unit: tokens, rate: 10, per: 1m}\n",
			want: "line 4: limits: must be a list, got a mapping (name: value lines): start each item with `- ` (`- name: …`), or write [a, b]"},
		{name: "one value for a list of sections", yaml: up + "keys: sk-dev\n",
			want: "line 3: keys: must be a list of sections, got `sk-dev`: start each item with `- ` on a line of its own, its fields indented under it"},
		{name: "one value for a list, in a flow mapping", yaml: up + "limits:\n  - {name: a, scope: user, unit: tokens, rate: 10, per: 1m, models: gpt-4o}\n",
			want: "line 4: limits[0].models: must be a list, got `gpt-4o`: write [gpt-4o]"},
		{name: "a long value the decoder cuts", yaml: up + "unmetered_paths: /v1/images/generations/and/a/long/path/*\n",
			want: "line 3: unmetered_paths: must be a list, got `/v1/images/generations/and/a/long/path/*`: write [/v1/images/generations/and/a/long/path/*]"},
		{name: "list items without dashes", yaml: "upstreams:\n  name: mock\n  flavor: openai\n",
			want: "line 2: upstreams: must be a list, got a mapping (name: value lines): start each item with `- ` (`- name: …`), or write [a, b]"},
		{name: "a list for a section", yaml: up + "store:\n  - backend: redis\n",
			want: "line 4: store: must be a section of fields (`field: value` lines indented under it), got a list"},
		{name: "a list for a mapping, inner of one line", yaml: "upstreams:\n  - {name: az, flavor: azure, base_url: \"http://127.0.0.1:1\", no_key: true, deployments: [chat-prod]}\n",
			want: "line 2: upstreams[0].deployments: must be a mapping (one `name: value` per line, or {name: value}), got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want *Error", err)
			}
			if got := strings.Join(ce.Problems, "\n"); got != tc.want {
				t.Errorf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// explainShape never panics; what it rewrites keeps the decoder's line and
// names a field path, and it rewrites only the decoder's shape messages.
func FuzzExplainShape(f *testing.F) {
	f.Add("line 2: cannot unmarshal !!map into []config.Limit", "limits:\n  a: {rate: 1}\n")
	f.Add("line 1: cannot unmarshal !!str `sk-dev` into []config.Key", "keys: sk-dev\n")
	f.Add("line 1: cannot unmarshal !!str `gpt-...` into []string", "limits: [{models: gpt-4o-mini-long}]\n")
	f.Add("line 1: cannot unmarshal !!seq into config.Store", "store: [a]\n")
	f.Add("line 1: cannot unmarshal !!seq into map[string]string", "upstreams: [{deployments: [x]}]\n")
	f.Add("line 1: cannot unmarshal !!seq into config.Duration", "store: {timeout: [1]}\n")
	f.Fuzz(func(t *testing.T, msg, src string) {
		if len(src) > 4096 {
			return
		}
		var root yaml.Node
		if yaml.Unmarshal([]byte(src), &root) != nil {
			return
		}
		m, path, ok := explainShape(msg, &root)
		if !ok {
			return
		}
		sub := wrongShape.FindStringSubmatch(msg)
		if sub == nil {
			t.Fatalf("rewrote %q, not a shape message, as %q", msg, m)
		}
		if path == "" || !strings.HasPrefix(m, "line "+sub[1]+": "+path+": ") {
			t.Fatalf("%q: rewritten %q (path %q) does not keep the line and name the path", msg, m, path)
		}
	})
}

// A number in quotes is text to YAML: it was reported as "`10000` is not a
// number", which reads as nonsense; now the quotes are named (new-user
// trial). A quoted value that is no number keeps the usual message.
func TestQuotedNumberNamesTheQuotes(t *testing.T) {
	const up = "upstreams:\n  - {name: mock, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}\n"
	for _, tc := range []struct{ yaml, want string }{
		{up + "limits:\n  - {name: a, scope: user, unit: tokens, rate: \"10000\", per: 1m}\n",
			"line 4: limits[0].rate: `10000` is quoted, so YAML reads it as text, not a number (write 10000, without quotes)"},
		{up + "max_connections: \"128\"\n",
			"line 3: max_connections: `128` is quoted, so YAML reads it as text, not a number (write 128, without quotes)"},
		{up + "limits:\n  - {name: a, scope: user, unit: tokens, rate: \"10k\", per: 1m}\n",
			"line 4: limits[0].rate: `10k` is not a number (write 10000 for 10k: numbers take no suffix, unit or separator)"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
