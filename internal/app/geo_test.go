package app

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/llmguard/llmguard/ledger"
)

// A Messages request that pins inference to a geography (inference_geo
// "us") is billed at 1.1x every token price (Anthropic's data residency):
// charged so, at admission and settlement; "global" and no inference_geo
// at the standard prices.
func TestInferenceGeoPricedAtPremium(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf("  - {name: acme-dollars, scope: tenant, unit: usd, quota: 10, period: month}\nledger: {file: %q}\n", file))
	for _, geo := range []string{`"inference_geo":"us",`, `"inference_geo":"global",`, ``} {
		resp, got := h.do("/v1/messages", `{"model":"claude-sonnet-4-5",`+geo+`"max_tokens":50,"messages":[{"role":"user","content":"hi there"}]}`,
			"x-mock-completion-tokens", "40")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", geo, resp.StatusCode, got)
		}
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil || len(recs) != 3 {
		t.Fatalf("ledger %+v, %v", recs, err)
	}
	for i, r := range recs {
		// claude-sonnet-4-5 in the harness: $3 input, $15 output per million
		// (3 and 15 µUSD per token); pinned: 3.3 and 16.5.
		want := r.InputTokens*3 + r.OutputTokens*15
		if i == 0 {
			want = (r.InputTokens*33 + r.OutputTokens*165 + 9) / 10
		}
		if r.OutputTokens != 40 || r.CostMicroUSD != want {
			t.Errorf("record %d: input %d output %d cost %d µUSD, want %d", i, r.InputTokens, r.OutputTokens, r.CostMicroUSD, want)
		}
	}
}
