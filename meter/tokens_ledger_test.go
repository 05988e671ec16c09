package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// tokenCounter is tokens_total's value for one kind (input, output…),
// summed over flavors and models.
func tokenCounter(t *testing.T, tl *timeline, kind string) int64 {
	t.Helper()
	mfs, err := tl.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "llmguard_tokens_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(sum)
}

// tokens_total counts the tokens each settlement charged, as the ledger
// records them: a finance team that adds up the ledger's input_tokens and
// output_tokens (or reads `llmguard usage`) finds the metric's totals. An
// answer whose usage llmguard could not read keeps its reservation, which
// the ledger records as its tokens and spend_usd_total prices; until this
// change tokens_total left those tokens out (a new-user trial: a JSON
// answer without usage, 8 input and 50 reserved output tokens, was in the
// ledger and the spend, and missing from tokens_total).
func TestTokensTotalMatchesTheLedger(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`)
	steps := []struct {
		name string
		s    Settlement
	}{
		{"reported", Settlement{Source: spec.SourceReported, Status: 200, Usage: spec.Usage{InputTokens: 90, CachedInputTokens: 40, OutputTokens: 30, ReasoningTokens: 10}}},
		{"refunded", Settlement{Source: spec.SourceRefund, Status: 502}},
		{"reservation stands", Settlement{Source: spec.SourceReserved, Status: 200}},
		{"counted", Settlement{Source: spec.SourceCounted, Status: 200, Usage: spec.Usage{InputTokens: 100, OutputTokens: 7}}},
	}
	for _, st := range steps {
		if x := tl.admit(100, 400); x.Verdict() != Admitted || !x.Settle(st.s) {
			t.Fatalf("step %s: not admitted and settled", st.name)
		}
	}
	var in, cached, out, reasoning int64
	for _, r := range tl.ledger.all() {
		in, cached, out, reasoning = in+r.InputTokens, cached+r.CachedInputTokens, out+r.OutputTokens, reasoning+r.ReasoningTokens
	}
	if in != 90+100+100 || out != 30+400+7 {
		t.Fatalf("ledger: %d input, %d output tokens, want 290 and 437 (the reservation of the unread answer included)", in, out)
	}
	for _, c := range []struct {
		kind string
		want int64
	}{{"input", in}, {"cached_input", cached}, {"output", out}, {"reasoning", reasoning}} {
		if got := tokenCounter(t, tl, c.kind); got != c.want {
			t.Errorf("tokens_total{kind=%q} = %d, want the ledger's %d", c.kind, got, c.want)
		}
	}
}
