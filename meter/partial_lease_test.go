package meter

import (
	"io"
	"log/slog"
	"testing"

	"github.com/llmguard/llmguard/bucket"
)

// A leased rule whose master goes down while its lease holds units: the
// node goes on admitting from the lease (capacity Redis gave it already),
// with the request's other rule taken in the store as usual; once the
// lease is spent and its refill fails, that rule alone follows its
// on_failure (closed: 503, and the other rule's take given back).
func TestPartialLeaseServesThenFailsAlone(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 100000, per: 1m, lease: {size: 4000, ttl: 10s}, on_failure: closed}
  - {name: all-tpm, scope: global, unit: tokens, rate: 1000000, per: 1m, on_failure: open}
`)
	hd.down = "{nothing}"
	leased := bucket.NewLeased(hd, bucket.LeaseOptions{Now: tl.clock.Now, SweepEvery: -1})
	t.Cleanup(func() { leased.Close() })
	m, err := New(Options{Store: leased, Fallback: tl.fallback, Metrics: tl.meter.opt.Metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	tl.meter = m
	if x := tl.admit(100, 900); x.Verdict() != Admitted || x.FromFallback() { // 1000 tokens, and a lease of 4000
		t.Fatalf("step 1: %v, want admitted by the store", x.Verdict())
	}
	if got := tl.level(tl.mem, "tpm"); got != 100000-1000-4000 {
		t.Fatalf("step 1: tpm holds %d, want 100000 − 1000 − a lease of 4000", got)
	}
	hd.down = "{acme}" // tpm's master
	for i := range 4 {
		x := tl.admit(100, 900)
		if x.Verdict() != Admitted || x.FromFallback() || x.Outcome(200) != OutcomeAllowed {
			t.Fatalf("step 2, request %d: %v (%s), want admitted, tpm from its lease", i, x.Verdict(), x.Outcome(200))
		}
	}
	if got := tl.level(tl.mem, "all-tpm"); got != 1000000-5*1000 {
		t.Fatalf("step 2: all-tpm holds %d in the store, want 1000000 − 5 × 1000: its live master charged each time", got)
	}
	x := tl.admit(100, 900)
	if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "tpm" {
		t.Fatalf("step 3 (lease spent, refill failed): %v closed by %v, want fail-closed by tpm", x.Verdict(), x.ClosedBy())
	}
	if got := tl.level(tl.mem, "all-tpm"); got != 1000000-5*1000 {
		t.Fatalf("step 3: all-tpm holds %d, want 1000000 − 5 × 1000: the refused request's take given back", got)
	}
	if got := tl.level(tl.mem, "tpm"); got != 100000-1000-4000 {
		t.Fatalf("step 3: tpm holds %d on its dead master, want 100000 − 5000: nothing reached it", got)
	}
	if st := leased.Stats()["tpm"]; st.Outstanding != 0 || st.Served != 4 {
		t.Fatalf("lease stats %+v, want 4 served from the lease and nothing left", st)
	}
	if closed, open := tl.failures("tpm", OutcomeFailClosed), tl.failures("all-tpm", OutcomeFailOpen); closed != 1 || open != 0 {
		t.Fatalf("failure decisions tpm fail_closed %v, all-tpm fail_open %v; want 1 and 0", closed, open)
	}
}
