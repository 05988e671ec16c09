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
  - {name: l, scope: %q, unit: %q, %s}
`, s, u, shapeOf(u)))
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

// shapeOf is a limit's shape for unit u: a rate, or a max for an in-flight
// limit.
func shapeOf(u string) string {
	if u == "concurrent" {
		return "max: 4"
	}
	return "rate: 60, per: 1m"
}

// Rule.Units has a meaning for every unit spec defines: a unit added to
// spec without its row here (and its case in Units) fails, rather than
// being charged as micro-USD by Units' default.
func TestUnitsCoversEverySpecUnit(t *testing.T) {
	tok := spec.Usage{InputTokens: 1000, OutputTokens: 30}
	price := Price{Input: 7_000_000, Output: 11_000_000} // per Mtok, in micro-USD
	want := map[string]int64{
		"requests":      1,
		"tokens":        1030,
		"input_tokens":  1000,
		"output_tokens": 30,
		"usd":           price.MicroUSD(tok),
		"concurrent":    1, // one slot
	}
	for _, name := range spec.UnitNames() {
		u, _ := spec.ParseUnit(name)
		w, ok := want[name]
		if !ok {
			t.Errorf("unit %q: no expected cost here; give it a case in Rule.Units and a row in this table", name)
			continue
		}
		if got := (&Rule{Unit: u}).Units(tok, price); got != w {
			t.Errorf("unit %q: Units = %d, want %d", name, got, w)
		}
	}
	if len(want) != len(spec.UnitNames()) {
		t.Errorf("table has %d units, spec %d", len(want), len(spec.UnitNames()))
	}
}
