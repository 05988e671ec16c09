package meter

import (
	"io"
	"log/slog"
	"testing"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/spec"
)

// A leased rule through the meter: its lease is taken with the first
// request, the next requests are served from it; reconciliation goes to
// the shared bucket; with the store down, the lease held is still spent
// (admitted, not fail_open), and once it is spent the fallback takes over.
func TestTimelineLease(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 100000, per: 1m, lease: {size: 4000, ttl: 1s}}
`)
	leased := bucket.NewLeased(tl.store, bucket.LeaseOptions{Now: tl.clock.Now, SweepEvery: -1})
	t.Cleanup(func() { leased.Close() })
	m, err := New(Options{Store: leased, Fallback: tl.fallback, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	tl.meter = m
	x := tl.admit(100, 900) // 1000 tokens, plus a lease of 4000
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v", x.Verdict())
	}
	if got := tl.level(tl.mem, "tpm"); got != 100000-1000-4000 {
		t.Fatalf("shared bucket %d, want %d: the request and a lease of 4000", got, 100000-1000-4000)
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 100}, Status: 200})
	if got := tl.level(tl.mem, "tpm"); got != 100000-200-4000 {
		t.Fatalf("after settlement the shared bucket holds %d, want %d: reconciled there", got, 100000-200-4000)
	}
	tl.store.down.Store(true)
	for i := range 4 { // 4 × 1000 from the lease
		if y := tl.admit(100, 900); y.Verdict() != Admitted || y.Outcome(200) != OutcomeAllowed {
			t.Fatalf("request %d with the store down: %v (%s), want admitted from the lease", i, y.Verdict(), y.Outcome(200))
		}
	}
	if st := leased.Stats()["tpm"]; st.Outstanding != 0 || st.Served != 4 {
		t.Fatalf("lease stats %+v, want 4 served and nothing left", st)
	}
	if y := tl.admit(100, 900); y.Verdict() != Admitted || y.Outcome(200) != OutcomeFailOpen {
		t.Fatalf("lease spent, store down: %v (%s), want fail_open from the fallback", y.Verdict(), y.Outcome(200))
	}
}
