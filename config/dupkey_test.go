package config

import (
	"errors"
	"strings"
	"testing"
)

// A key written twice in one mapping is reported with both lines, and
// alone: go.yaml.in/yaml/v3 decodes nothing of a mapping that holds a
// duplicate, so what validation would say of it is about an empty mapping,
// not the file. A new-user trial's config with a second top-level ledger:
// key was answered "upstreams: at least one upstream is required" beside the
// real problem, though its first line was an upstream.
func TestDuplicateKeyIsReportedAlone(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"top level", `upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:8081", no_key: true}]
keys: [{key: sk-a, user: a, tenant: t}]
limits:
  - {name: l, scope: user, unit: tokens, rate: 1000, per: 1h}
limits:
  - {name: l2, scope: user, unit: tokens, rate: 1000, per: 1h}
`, `line 5: mapping key "limits" already defined at line 3`},
		{"in a limit", `upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:8081", no_key: true}]
keys: [{key: sk-a, user: a, tenant: t}]
limits:
  - name: l
    scope: user
    unit: tokens
    rate: 1000
    per: 1h
    rate: 2000
`, `line 9: mapping key "rate" already defined at line 7`},
	} {
		_, err := Parse([]byte(c.yaml))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want *Error", c.name, err)
		}
		if len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], c.want) {
			t.Errorf("%s: problems %q, want the duplicate key alone (%s)", c.name, ce.Problems, c.want)
		}
	}
}
