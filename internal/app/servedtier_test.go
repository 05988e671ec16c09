package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/spec"
)

// An OpenAI answer says which service tier it was served at: a request
// sent without one that its project serves at priority is charged
// priority prices, in the budget and the ledger, through the sockets —
// chat and Responses, JSON and streamed. An answer naming a cheaper tier
// than the request asked for is charged the request's tier. Each expected
// charge is the price table's price of the usage the ledger records.
func TestServedTierPricedThroughTheSocket(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "s3cret")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 10, period: month}
ledger: {file: %q}
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
`, file))
	used := func() int64 { // the budget's used micro-USD, from the store
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, h.admin+"/admin/usage?tenant=acme&period=month", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep UsageReport
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || len(rep.Quotas) != 1 {
			t.Fatalf("usage report %+v: %v", rep, err)
		}
		return rep.Quotas[0].Used
	}
	records := func() []ledger.Record {
		t.Helper()
		if err := h.app.Ledger.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		recs, err := ledger.ReadFiles(file)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	pol := h.app.policy()
	n := 0
	for _, api := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-5",%s"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":50}`},
		{"chat stream", "/v1/chat/completions", `{"model":"gpt-5",%s"stream":true,"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":50}`},
		{"responses", "/v1/responses", `{"model":"gpt-5",%s"input":"hi","max_output_tokens":50}`},
		{"responses stream", "/v1/responses", `{"model":"gpt-5",%s"stream":true,"input":"hi","max_output_tokens":50}`},
	} {
		for _, tier := range []struct{ asked, served, charged string }{
			{"", "priority", "priority"},
			{"", "default", "default"},
			{"priority", "flex", "priority"},
		} {
			name := fmt.Sprintf("%s asking %q, served at %q", api.name, tier.asked, tier.served)
			field := ""
			if tier.asked != "" {
				field = `"service_tier":"` + tier.asked + `",`
			}
			before := used()
			resp, got := h.do(api.path, fmt.Sprintf(api.body, field), "x-mock-completion-tokens", "20", "x-mock-service-tier", tier.served)
			if resp.StatusCode != 200 || !strings.Contains(got, `"service_tier":"`+tier.served+`"`) {
				t.Fatalf("%s: %d %.300s", name, resp.StatusCode, got)
			}
			n++
			var recs []ledger.Record
			if !waitFor(10*time.Second, func() bool { recs = records(); return len(recs) == n }) {
				t.Fatalf("%s: %d ledger records, want %d", name, len(recs), n)
			}
			r := recs[n-1]
			u := spec.Usage{InputTokens: r.InputTokens, CachedInputTokens: r.CachedInputTokens, OutputTokens: r.OutputTokens, ReasoningTokens: r.ReasoningTokens}
			want := pol.Quote("gpt-5", tier.charged).Price.MicroUSD(u)
			if std := pol.Quote("gpt-5", "default").Price.MicroUSD(u); tier.charged == "priority" && want <= std {
				t.Fatalf("%s: priority costs %d µUSD, standard %d: the table does not price priority higher", name, want, std)
			}
			if r.OutputTokens != 20 || r.CostMicroUSD != want || r.ServiceTier != tier.charged {
				t.Errorf("%s: ledger output %d cost %d µUSD tier %q, want 20 tokens at %d µUSD, %q", name, r.OutputTokens, r.CostMicroUSD, r.ServiceTier, want, tier.charged)
			}
			var spent int64
			if !waitFor(10*time.Second, func() bool { spent = used() - before; return spent == want }) {
				t.Errorf("%s: the budget was charged %d µUSD, want %d (%s prices)", name, spent, want, tier.charged)
			}
		}
	}
}
