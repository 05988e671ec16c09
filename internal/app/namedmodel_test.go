package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/report"
	"github.com/llmguard/llmguard/ledger"
)

// TestCountTokensRecordsItsModel: a request that is not weighed
// (count_tokens, moderations) is written to the ledger under the model its
// body names, so `llmguard usage` and `llmguard report` show it in that
// model's row rather than in "(none)"; one whose body names none (GET
// /v1/models) stays in "(none)". It is still limited as a request naming
// no model: a requests rule on claude-* does not count it. Its
// requests_total series carries the same model label as a weighed request
// of that model.
func TestCountTokensRecordsItsModel(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf(`  - {name: claude-rpm, scope: user, unit: requests, rate: 1, per: 1h, burst: 1, models: ["claude-*"]}
ledger: {file: %q}
`, file))
	countTokens := `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 {
		if resp, b := h.do("/v1/messages/count_tokens", countTokens); resp.StatusCode != 200 {
			t.Fatalf("count_tokens %d: %d %s (limited as claude-haiku-4-5?)", i, resp.StatusCode, b)
		}
	}
	h.do("/v1/moderations", `{"model":"omni-moderation-latest","input":"hi"}`)
	h.probe() // GET /v1/models
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]int64{}
	for _, r := range recs {
		models[r.Model]++
	}
	want := map[string]int64{"claude-haiku-4-5": 2, "omni-moderation-latest": 1, "": 1}
	if fmt.Sprint(models) != fmt.Sprint(want) {
		t.Errorf("ledger records by model %v, want %v", models, want)
	}

	// llmguard usage (/admin/usage): the model's row.
	u, err := h.app.Usage(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, r := range u.ByModel {
		rows[r.Model] = r.Requests
	}
	if rows["claude-haiku-4-5"] != 2 || rows["omni-moderation-latest"] != 1 || rows[""] != 1 {
		t.Errorf("usage rows by model %v, want claude-haiku-4-5 2, omni-moderation-latest 1, (none) 1", rows)
	}

	// requests_total labels it as the ledger names it (a priced name, else
	// "other"), so a dashboard's requests per model add up to usage's rows.
	metrics := h.metrics()
	for _, series := range []string{
		`llmguard_requests_total{flavor="anthropic",limit="",model="claude-haiku-4-5",outcome="allowed"} 2`,
		`llmguard_requests_total{flavor="openai",limit="",model="other",outcome="allowed"} 1`,
		`llmguard_requests_total{flavor="openai",limit="",model="",outcome="allowed"} 1`,
	} {
		if !strings.Contains(metrics, series+"\n") {
			t.Errorf("/metrics lacks %s; its requests_total:\n%s", series, grepLines(metrics, "llmguard_requests_total{"))
		}
	}

	// llmguard report: the same rows.
	now := time.Now().UTC()
	rep, err := report.Build(recs, report.Options{Tenant: "acme", Year: now.Year(), Month: now.Month(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rows = map[string]int64{}
	for _, r := range rep.Models {
		rows[r.Name] = r.Requests
	}
	if rows["claude-haiku-4-5"] != 2 || rows["omni-moderation-latest"] != 1 || rows[ledger.NoName] != 1 {
		t.Errorf("report rows by model %v, want claude-haiku-4-5 2, omni-moderation-latest 1, %s 1", rows, ledger.NoName)
	}
}
