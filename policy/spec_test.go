package policy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// Every unit and scope name compiles to the spec value of that name.
func TestCompileEverySpecName(t *testing.T) {
	for _, u := range spec.UnitNames() {
		for _, s := range spec.ScopeNames() {
			c := mustConfig(t, fmt.Sprintf(`
upstreams:
  - {name: up, flavor: openai, base_url: "http://127.0.0.1:1"}
limits:
  - {name: l, scope: %q, unit: %q, rate: 60, per: 1m}
`, s, u))
			p, err := Compile(c)
			if err != nil {
				t.Fatalf("%s/%s: %v", s, u, err)
			}
			r := p.Rules()[0]
			if r.Unit.String() != u || r.Scope.String() != s {
				t.Errorf("scope %q unit %q compiled to %v %v", s, u, r.Scope, r.Unit)
			}
		}
	}
}

// An unvalidated config naming an unknown unit or scope is refused, not
// compiled into some other unit or scope.
func TestCompileRefusesUnknownUnitOrScope(t *testing.T) {
	for _, l := range []config.Limit{
		{Name: "a", Scope: "org", Unit: "requests", Rate: 1, Burst: 1, Per: config.Duration(1e9)},
		{Name: "b", Scope: "key", Unit: "bananas", Rate: 1, Burst: 1, Per: config.Duration(1e9)},
	} {
		_, err := Compile(&config.Config{Limits: []config.Limit{l}})
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Errorf("limit %+v: err = %v, want *config.Error", l, err)
		}
	}
}
