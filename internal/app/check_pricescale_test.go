package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// A price written per 1K tokens or per token where USD per million is
// meant makes every usd limit count the model's calls at a thousandth or a
// millionth of their cost; trial27's config with gpt-4o-mini at 0.00015 /
// 0.0006 validated "OK". A price a hundredfold or more from the embedded
// table's for the same name is warned of, either way; a discount, an
// explicit 0, an alias and a model the table does not list are not.
func TestCheckPriceScale(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://127.0.0.1:8081", no_key: true}]
keys: [{key: sk-a, tenant: acme}]
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.00015, output_usd_per_mtok: 0.0000006}
  gpt-4o: {input_usd_per_mtok: 250, output_usd_per_mtok: 5}
  claude-sonnet-4-5: {input_usd_per_mtok: 0.03, output_usd_per_mtok: 0.1500001}
  gpt-5: {input_usd_per_mtok: 0, output_usd_per_mtok: 0}
  my-model: {input_usd_per_mtok: 0.00001, output_usd_per_mtok: 0.00002}
  team/gpt-4o-mini: {alias_of: gpt-4o-mini}
limits:
  - {name: d, scope: tenant, unit: usd, quota: 10, period: day}
`, nil)
	for _, tc := range []struct {
		field string
		says  string // "": no finding
	}{
		{"models.gpt-4o-mini.input_usd_per_mtok", "0.00015 is 1/1000 of the embedded price table's 0.15 for gpt-4o-mini"},
		{"models.gpt-4o-mini.output_usd_per_mtok", "6e-07 is 1/1000000 of the embedded price table's 0.6"},
		{"models.gpt-4o.input_usd_per_mtok", "250 is 100 times the embedded price table's 2.5"},
		{"models.gpt-4o.output_usd_per_mtok", ""},                   // half the table's 10: a discount
		{"models.claude-sonnet-4-5.input_usd_per_mtok", "1/100 of"}, // 3 / 0.03
		{"models.claude-sonnet-4-5.output_usd_per_mtok", ""},        // 1/99.99…: within the factor
		{"models.gpt-5.input_usd_per_mtok", ""},
		{"models.my-model.input_usd_per_mtok", ""},
		{"models.team/gpt-4o-mini.input_usd_per_mtok", ""},
	} {
		got := found(fs, tc.field)
		if tc.says == "" {
			if len(got) != 0 {
				t.Errorf("%s: %v, want nothing", tc.field, got)
			}
			continue
		}
		if len(got) != 1 || !strings.Contains(got[0].Message, tc.says) || got[0].Fatal {
			t.Errorf("%s: %v, want one warning saying %q", tc.field, got, tc.says)
		}
	}
}

// A reload that changes a price (trial27's "price changed" step) is
// checked as a start is: one written per 1K tokens is logged as a warning
// naming the field, and applied (it is a warning, not a refusal).
func TestReloadWarnsOfPricePerThousand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	write := func(price string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(reloadConfig("models: {gpt-4o-mini: {input_usd_per_mtok: "+price+", output_usd_per_mtok: 0.6}}\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0.15")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	before := len(logs.String())
	write("0.00015")
	if err := a.Reload(path); err != nil {
		t.Fatalf("reload: %v", err)
	}
	got := logs.String()[before:]
	if !strings.Contains(got, "models.gpt-4o-mini.input_usd_per_mtok") || !strings.Contains(got, "1/1000 of the embedded price table") {
		t.Errorf("reload to a price per 1K tokens logged no warning naming it:\n%s", got)
	}
	if p := a.cfg.Load().Models["gpt-4o-mini"].InputUSDPerMTok; p != 0.00015 {
		t.Errorf("running input price %v after the reload, want 0.00015 (applied)", p)
	}
}
