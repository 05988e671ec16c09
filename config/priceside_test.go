package config

import (
	"errors"
	"strings"
	"testing"
)

// parseProblems parses a config made of head and the lines of body, and
// returns its problems (nil when it parses).
func parseProblems(t *testing.T, body string) []string {
	t.Helper()
	_, err := Parse([]byte("upstreams:\n  - {name: openai, flavor: openai, base_url: \"http://127.0.0.1:9\", no_key: true}\n" +
		"limits:\n  - {name: spend, scope: tenant, unit: usd, rate: 10, per: 24h}\n" + body))
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a config error: %v", err)
	}
	return ce.Problems
}

// An entry that prices one side of a model the price layers do not know
// would let the other side cost nothing under a usd limit: refused, unless
// the side is named, if only as 0.
func TestOneSidedPriceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string // want: the field a problem names, "" for none
	}{
		{"input only", "models: {my-model: {input_usd_per_mtok: 1}}", "models.my-model.output_usd_per_mtok"},
		{"cached input only", "models: {my-model: {cached_input_usd_per_mtok: 1}}", "models.my-model.input_usd_per_mtok"},
		{"cached input and output", "models: {my-model: {cached_input_usd_per_mtok: 1, output_usd_per_mtok: 4}}", "models.my-model.input_usd_per_mtok"},
		{"cache write and output", "models: {my-model: {cache_write_usd_per_mtok: 1, output_usd_per_mtok: 4}}", "models.my-model.input_usd_per_mtok"},
		{"output null", "models: {my-model: {input_usd_per_mtok: 1, output_usd_per_mtok: }}", "models.my-model.output_usd_per_mtok"},
		{"output tilde", "models: {my-model: {input_usd_per_mtok: 1, output_usd_per_mtok: ~}}", "models.my-model.output_usd_per_mtok"},
		{"priority input only", "models: {my-model: {input_usd_per_mtok: 1, output_usd_per_mtok: 4, priority: {input_usd_per_mtok: 2}}}",
			"models.my-model.priority.output_usd_per_mtok"},
		{"flex output only", "models: {my-model: {input_usd_per_mtok: 1, output_usd_per_mtok: 4, flex: {output_usd_per_mtok: 2}}}",
			"models.my-model.flex.input_usd_per_mtok"},
		{"table model, priority input only", "models: {gpt-5: {priority: {input_usd_per_mtok: 3}}}", ""}, // output from the table's priority tier
		{"default_price null output", "default_price: {input_usd_per_mtok: 30, output_usd_per_mtok: null}", "default_price.output_usd_per_mtok"},
		{"output only", "models: {my-model: {output_usd_per_mtok: 4}}", "models.my-model.input_usd_per_mtok"},
		{"explicit zero output", "models: {my-embed: {input_usd_per_mtok: 0.02, output_usd_per_mtok: 0}}", ""},
		{"both", "models: {my-model: {input_usd_per_mtok: 1, output_usd_per_mtok: 4}}", ""},
		{"table model, input only", "models: {gpt-4o-mini: {input_usd_per_mtok: 0.2}}", ""},
		{"no prices", "models: {my-model: {encoding: o200k_base}}", ""},
		{"alias", "models: {my-model: {alias_of: gpt-4o}}", ""},
		{"default_price input only", "default_price: {input_usd_per_mtok: 30}", "default_price.output_usd_per_mtok"},
		{"default_price both", "default_price: {input_usd_per_mtok: 30, output_usd_per_mtok: 120}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probs := parseProblems(t, tc.body)
			if tc.want == "" {
				if len(probs) > 0 {
					t.Fatalf("refused: %q", probs)
				}
				return
			}
			if len(probs) != 1 || !strings.HasPrefix(probs[0], "line 5: "+tc.want+": missing") {
				t.Fatalf("problems %q, want one naming %s", probs, tc.want)
			}
		})
	}
}

// A key pasted where a variable name goes is refused without being echoed,
// and so is a virtual key that could never match.
func TestSecretsAreNotEchoed(t *testing.T) {
	_, err := Parse([]byte(`
upstreams:
  - {name: openai, flavor: openai, base_url: "http://127.0.0.1:9", api_key_env: sk-proj-REALSECRET123}
keys:
  - {key: " sk-lg-spacedsecret ", tenant: acme}
limits:
  - {name: rpm, scope: user, unit: requests, rate: 60, per: 1m}
`))
	if err == nil {
		t.Fatal("parsed")
	}
	msg := err.Error()
	for _, field := range []string{"upstreams[0].api_key_env:", "keys[0].key:"} {
		if !strings.Contains(msg, field) {
			t.Errorf("no problem names %s: %s", field, msg)
		}
	}
	if strings.Contains(msg, "REALSECRET") || strings.Contains(msg, "spacedsecret") {
		t.Errorf("a secret is echoed: %s", msg)
	}
	for _, ok := range []string{"OPENAI_API_KEY", "_k", "k9"} {
		if !envName(ok) {
			t.Errorf("envName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "9k", "sk-proj-x", "A B", "É"} {
		if envName(bad) {
			t.Errorf("envName(%q) = true", bad)
		}
	}
}

// A tier a models: entry writes takes the prices it leaves unset from the
// same tier below: overriding only gpt-5's priority input keeps the
// table's priority output, where the block used to replace the tier whole
// and price priority output at zero (adversarial pass of 2026-12-03).
func TestTierTakesUnsetPricesFromBelow(t *testing.T) {
	base, err := Parse([]byte("upstreams:\n  - {name: openai, flavor: openai, base_url: \"http://127.0.0.1:9\", no_key: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("upstreams:\n  - {name: openai, flavor: openai, base_url: \"http://127.0.0.1:9\", no_key: true}\n" +
		"models: {gpt-5: {priority: {input_usd_per_mtok: 3}, flex: {output_usd_per_mtok: 4.5}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	table, got := base.Models["gpt-5"], c.Models["gpt-5"]
	if table.Priority == nil || table.Flex == nil {
		t.Fatal("the embedded table has no priority or flex prices for gpt-5")
	}
	if got.Priority.InputUSDPerMTok != 3 || got.Priority.OutputUSDPerMTok != table.Priority.OutputUSDPerMTok ||
		got.Priority.CachedInputUSDPerMTok != table.Priority.CachedInputUSDPerMTok {
		t.Errorf("priority %+v, want input 3 and the rest of the table's %+v", *got.Priority, *table.Priority)
	}
	if got.Flex.OutputUSDPerMTok != 4.5 || got.Flex.InputUSDPerMTok != table.Flex.InputUSDPerMTok {
		t.Errorf("flex %+v, want output 4.5 and the rest of the table's %+v", *got.Flex, *table.Flex)
	}
	if *base.Models["gpt-5"].Priority != *table.Priority {
		t.Error("the merge changed the table's own tier")
	}
}

// A prices_file entry with an input price but no output price (absent or
// null) is left unpriced, unless its mode bills no output (embedding,
// moderation): it used to be read as priced with free output.
func TestPricesFileOneSidedEntryIsUnpriced(t *testing.T) {
	models, err := ParsePrices([]byte(`{
		"my-chat": {"input_cost_per_token": 0.000001},
		"my-chat2": {"input_cost_per_token": 0.000001, "output_cost_per_token": null},
		"my-embed": {"input_cost_per_token": 0.0000001, "mode": "embedding"},
		"my-full": {"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000004}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"my-chat": false, "my-chat2": false, "my-embed": true, "my-full": true} {
		if _, got := models[name]; got != want {
			t.Errorf("%s priced: %v, want %v", name, got, want)
		}
	}
}
