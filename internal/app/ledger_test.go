package app

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// One ledger record per forwarded request, upstream errors included, none
// for denials; each record's cost is its usage at the model's prices,
// rounded up to the micro-dollar, so the ledger total is the sum of them.
func TestLedgerRecordsEveryForwardedRequest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf("  - {name: tiny, scope: user, unit: requests, rate: 1, per: 24h, burst: 4}\nledger: {file: %q}\n", file))
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	h.do("/v1/responses", `{"model":"gpt-4o-mini","input":"hello","max_output_tokens":50,"stream":true}`, "x-mock-completion-tokens", "9")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
		"x-mock-completion-tokens", "7", "x-mock-cache-read", "3", "x-mock-cache-write", "2")
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-status", "500")
	h.do("/v1/embeddings", `{"model":"text-embedding-3-small","input":"abc"}`)
	// The sixth request is denied by `tiny` (4 requests; the 500 was refunded)
	// and never forwarded.
	if resp, _ := h.do("/v1/embeddings", `{"model":"text-embedding-3-small","input":"abc"}`); resp.StatusCode != 429 {
		t.Fatalf("sixth request: %d, want 429", resp.StatusCode)
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5 (one per forwarded request): %+v", len(recs), recs)
	}
	prices := map[string]policy.Price{
		"gpt-4o-mini":            policy.USDPerMTok{Input: 0.15, CachedInput: 0.075, Output: 0.60}.Price(),
		"claude-sonnet-4-5":      policy.USDPerMTok{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}.Price(),
		"text-embedding-3-small": policy.USDPerMTok{Input: 0.02}.Price(),
	}
	var sum int64
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.RequestID] {
			t.Errorf("request %s recorded twice", r.RequestID)
		}
		seen[r.RequestID] = true
		if r.KeyID == "" || r.KeyID == testKey || r.Tenant != "acme" || r.User != "alice" {
			t.Errorf("identity fields: %+v", r)
		}
		want := prices[r.Model].MicroUSD(spec.Usage{InputTokens: r.InputTokens, CachedInputTokens: r.CachedInputTokens,
			CacheWriteTokens: r.CacheWriteTokens, OutputTokens: r.OutputTokens})
		if r.Status == 500 {
			want = 0 // refunded: nothing was used
			if r.InputTokens != 0 || r.OutputTokens != 0 {
				t.Errorf("refunded request recorded usage: %+v", r)
			}
		}
		if r.CostMicroUSD != want {
			t.Errorf("%s (%s, status %d): cost %d µUSD, want %d", r.RequestID, r.Model, r.Status, r.CostMicroUSD, want)
		}
		if r.Model == "claude-sonnet-4-5" && (r.CachedInputTokens != 3 || r.CacheWriteTokens != 2 || r.OutputTokens != 7) {
			t.Errorf("anthropic usage: %+v", r)
		}
		sum += r.CostMicroUSD
	}
	s := ledger.Summarize(recs, ledger.Filter{Tenant: "acme"})
	if s.Total.CostMicroUSD != sum || s.Total.Requests != 5 {
		t.Errorf("summary total %d µUSD over %d requests, want %d over 5", s.Total.CostMicroUSD, s.Total.Requests, sum)
	}
}
