package app

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// TestAdv35ContainerFeeReservedAndCharged: through real sockets, a
// Responses request with a hosted code interpreter is charged its
// container beside its tokens ($0.03 a GB per session: OpenAI opens an
// "auto" container for the request whether or not the model calls the
// tool, and no usage reports it), and a 64 GB container ($1.92) is
// refused under a $1 budget instead of being forwarded. Before, the fee
// was neither reserved nor charged: a $1 budget let any number of 64 GB
// containers through, each billed $1.92 upstream.
func TestAdv35ContainerFeeReservedAndCharged(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, max_input_tokens: 1000}
limits:
  - {name: acme-dollars, scope: tenant, unit: usd, quota: 1, period: month}
ledger: {file: %q}
`, mock.URL, testKey, file))
	body := func(container string) string {
		return `{"model":"gpt-4o-mini","max_output_tokens":50,"input":"run it","tools":[{"type":"code_interpreter","container":` + container + `}]}`
	}
	resp, got := h.do("/v1/responses", body(`{"type":"auto"}`), "x-mock-completion-tokens", "40")
	if resp.StatusCode != 200 {
		t.Fatalf("a 1 GB container: %d %s", resp.StatusCode, got)
	}
	calls := mock.Requests.Load()
	resp, got = h.do("/v1/responses", body(`{"type":"auto","memory_limit":"64g"}`), "x-mock-completion-tokens", "40")
	if resp.StatusCode == 200 || mock.Requests.Load() != calls {
		t.Errorf("a 64 GB container ($1.92) under a $1 budget: %d, forwarded %d times; want refused, never forwarded: %s",
			resp.StatusCode, mock.Requests.Load()-calls, got)
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ledger %+v, %v; want one record", recs, err)
	}
	r := recs[0]
	// gpt-4o-mini: 150,000 and 600,000 pico-USD a token; the container
	// 30,000,000,000 (30,000 µUSD).
	want := (r.InputTokens*150_000 + r.OutputTokens*600_000 + 30_000_000_000 + 999_999) / 1_000_000
	if r.ContainerGB != 1 || r.CostMicroUSD != want || r.OutputTokens != 40 {
		t.Errorf("record: %d GB-sessions, cost %d µUSD (input %d, output %d); want 1 and %d", r.ContainerGB, r.CostMicroUSD,
			r.InputTokens, r.OutputTokens, want)
	}
}
