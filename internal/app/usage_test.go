package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
)

// GET /admin/usage: bearer-protected; spend from the ledger to the
// micro-dollar, per tenant, user and model; each quota's used and
// remaining from the store, agreeing with the ledger.
func TestAdminUsageReport(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "s3cret")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month}
ledger: {file: %q}
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
`, file))
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "x-mock-completion-tokens", "9")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":true}`, "x-mock-completion-tokens", "4")

	get := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, h.admin+"/admin/usage?tenant=acme&period=month", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get(""); resp.StatusCode != 401 {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get("wrong"); resp.StatusCode != 401 {
		t.Errorf("wrong token: %d, want 401", resp.StatusCode)
	}
	resp, body := get("s3cret")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var rep UsageReport
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 3 || rep.Spend.MicroUSD <= 0 || rep.Source != "file" {
		t.Fatalf("report: %s", body)
	}
	var byModel int64
	for _, m := range rep.ByModel {
		byModel += m.Spend.MicroUSD
	}
	if byModel != rep.Spend.MicroUSD || len(rep.ByModel) != 2 || len(rep.ByUser) != 1 || len(rep.ByTenant) != 1 {
		t.Errorf("per-model spend %d vs total %d; rows %d models, %d users, %d tenants", byModel, rep.Spend.MicroUSD,
			len(rep.ByModel), len(rep.ByUser), len(rep.ByTenant))
	}
	if rep.Spend.USD != float64(rep.Spend.MicroUSD)/1e6 || rep.BurnRateUSDPerDay <= 0 {
		t.Errorf("spend %+v, burn rate %v", rep.Spend, rep.BurnRateUSDPerDay)
	}
	if len(rep.Quotas) != 1 {
		t.Fatalf("quotas: %+v", rep.Quotas)
	}
	q := rep.Quotas[0]
	// The store's quota holds exactly what the ledger says was spent.
	if q.Limit != "acme-month" || q.Quota != 1_000_000 || q.Used != rep.Spend.MicroUSD || q.Remaining != q.Quota-q.Used || q.Unit != "micro_usd" {
		t.Errorf("quota %+v, want used = ledger spend %d", q, rep.Spend.MicroUSD)
	}
	if !q.PeriodEnd.After(q.PeriodStart) || q.DaysLeft <= 0 {
		t.Errorf("quota period/days left: %+v", q)
	}
}
