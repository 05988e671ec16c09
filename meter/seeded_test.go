package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// A quota that a take through the store found nearly spent is served,
// once the store fails, from a fallback share that starts at what that
// take saw left divided by the nodes (bucket.Fallback.ObserveLevels, fed
// by the meter), not from a full share: 200 left of 1,000 over two nodes
// leaves this node 100, not 500.
func TestFallbackSeededFromStoreTake(t *testing.T) {
	tl := newTimeline(t, `  - {name: day, scope: tenant, unit: tokens, quota: 1000, period: day, on_failure: open}
`)
	x := tl.admit(100, 700)
	if x.Verdict() != Admitted || x.FromFallback() {
		t.Fatalf("step 1: %v (from the fallback %v), want admitted by the store", x.Verdict(), x.FromFallback())
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 700}, Status: 200})
	tl.store.down.Store(true)
	if x := tl.admit(50, 60); x.Verdict() != Denied || !x.FromFallback() {
		t.Fatalf("step 2 (store down, 110 reserved): %v (from the fallback %v), want denied by the fallback: 200 left / 2 nodes = 100",
			x.Verdict(), x.FromFallback())
	}
	if x := tl.admit(50, 50); x.Verdict() != Admitted || !x.FromFallback() {
		t.Fatalf("step 3 (store down, 100 reserved): %v (from the fallback %v), want admitted by the fallback", x.Verdict(), x.FromFallback())
	}
}

// A take served in part by the fallback (a Redis Cluster master down) is
// a reading of the rules the store judged only: the fallback's own status
// of the failed rule must not seed its bucket later, and the served rule's
// reading must not be lost.
func TestFallbackNotSeededFromItsOwnStatus(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: t-day, scope: tenant, unit: tokens, quota: 1000, period: day, on_failure: open}
  - {name: g-day, scope: global, unit: tokens, quota: 1000, period: day, on_failure: open}
`)
	x := tl.admit(100, 300)
	if r := x.Rules(); x.Verdict() != Admitted || len(r) != 2 || r[0].Fallback || !r[1].Fallback {
		t.Fatalf("step 1: %v, rules %+v; want t-day from the store and g-day from the fallback", x.Verdict(), x.Rules())
	}
	// Every master down now: both rules from the fallback. g-day's
	// fallback bucket holds 500 − 400 = 100 of its share; had step 1's
	// decision been taken as a reading, its 100 would seed it at 100 / 2.
	for i := range tl.policy.Rules() {
		if r := &tl.policy.Rules()[i]; r.Name == "t-day" {
			hd.more = append(hd.more, r.Key(tl.alice))
		}
	}
	if x := tl.admit(50, 50); x.Verdict() != Admitted || !x.FromFallback() {
		t.Fatalf("step 2 (all down, 100 reserved): %v (from the fallback %v), want admitted: g-day's fallback has 100 left",
			x.Verdict(), x.FromFallback())
	}
	// t-day's reading in step 1 (600 left in the store) started its
	// fallback at 600 / 2 = 300, less step 2's 100.
	if got := tl.level(tl.fallback, "t-day"); got != 200 {
		t.Fatalf("step 3: the fallback's t-day holds %d, want 600 / 2 − 100 = 200", got)
	}
}

// A reading moves with the node's own settlements after it
// (bucket.Fallback.ObserveDelta, fed by Settle): a take that reserved 800
// of a 1,000 quota reads 200 left, and its settlement at 200 gives 600
// back, so the fallback of two nodes starts at 800 / 2 = 400, not 100; a
// settlement above the reservation lowers the reading. A cached denial is
// no reading, and a settlement of a take the fallback served moves none.
func TestFallbackReadingMovedBySettlement(t *testing.T) {
	const limits = `  - {name: day, scope: tenant, unit: tokens, quota: 1000, period: day, on_failure: open}
`
	t.Run("refund", func(t *testing.T) {
		tl := newTimeline(t, limits)
		x := tl.admit(100, 700)
		if x.Verdict() != Admitted || x.FromFallback() {
			t.Fatalf("step 1: %v (from the fallback %v), want admitted by the store", x.Verdict(), x.FromFallback())
		}
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 100}, Status: 200})
		tl.store.down.Store(true)
		if x := tl.admit(50, 360); x.Verdict() != Denied || !x.FromFallback() {
			t.Fatalf("step 2 (store down, 410 reserved): %v (from the fallback %v), want denied: 800 left / 2 nodes = 400", x.Verdict(), x.FromFallback())
		}
		x = tl.admit(50, 350)
		if x.Verdict() != Admitted || !x.FromFallback() {
			t.Fatalf("step 3 (store down, 400 reserved): %v (from the fallback %v), want admitted by the fallback", x.Verdict(), x.FromFallback())
		}
		// Settled by the fallback: its refund is the fallback's, no reading's.
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 50, OutputTokens: 50}, Status: 200})
		if got := tl.level(tl.fallback, "day"); got != 300 {
			t.Fatalf("step 4: the fallback's day holds %d, want 400 − 100 = 300", got)
		}
	})
	t.Run("charge", func(t *testing.T) {
		tl := newTimeline(t, limits)
		x := tl.admit(100, 300)
		if x.Verdict() != Admitted || x.FromFallback() {
			t.Fatalf("step 1: %v (from the fallback %v), want admitted by the store", x.Verdict(), x.FromFallback())
		}
		// 400 reserved, 600 used: 200 more charged, 400 left.
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 300, OutputTokens: 300}, Status: 200})
		tl.store.down.Store(true)
		if x := tl.admit(50, 160); x.Verdict() != Denied || !x.FromFallback() {
			t.Fatalf("step 2 (store down, 210 reserved): %v (from the fallback %v), want denied: 400 left / 2 nodes = 200", x.Verdict(), x.FromFallback())
		}
		if x := tl.admit(50, 150); x.Verdict() != Admitted || !x.FromFallback() {
			t.Fatalf("step 3 (store down, 200 reserved): %v (from the fallback %v), want admitted by the fallback", x.Verdict(), x.FromFallback())
		}
	})
}

// A settlement's delta on a rule the fallback served moves no reading:
// that rule's reservation was never in the store, so its refund would
// raise a later reading of the store past what the store held. Step 1
// takes g-day from the fallback (its master down), step 2 reads g-day in
// the store (800 left), step 3 settles step 1 with everything refunded:
// the store's t-day reading moves, g-day's stays 800, and with every
// master down g-day's fallback starts at 800 / 2 = 400, not its full 500.
func TestFallbackReadingNotMovedByFallbackSettlement(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: t-day, scope: tenant, unit: tokens, quota: 10000, period: day, on_failure: open}
  - {name: g-day, scope: global, unit: tokens, quota: 1000, period: day, on_failure: open}
`)
	x1 := tl.admit(100, 300)
	if r := x1.Rules(); x1.Verdict() != Admitted || len(r) != 2 || r[0].Fallback || !r[1].Fallback {
		t.Fatalf("step 1: %v, rules %+v; want t-day from the store and g-day from the fallback", x1.Verdict(), x1.Rules())
	}
	hd.down = "no master down"
	if x := tl.admit(100, 100); x.Verdict() != Admitted || x.FromFallback() {
		t.Fatalf("step 2: %v (from the fallback %v), want admitted by the store", x.Verdict(), x.FromFallback())
	}
	x1.Settle(Settlement{Source: spec.SourceReported, Status: 200}) // nothing used: 400 back on each rule
	hd.down = ""                                                    // every key
	if x := tl.admit(50, 360); x.Verdict() != Denied || !x.FromFallback() {
		t.Fatalf("step 4 (all down, 410 reserved): %v (from the fallback %v), want denied by g-day: 800 left / 2 nodes = 400", x.Verdict(), x.FromFallback())
	}
	if x := tl.admit(50, 350); x.Verdict() != Admitted || !x.FromFallback() {
		t.Fatalf("step 5 (all down, 400 reserved): %v (from the fallback %v), want admitted by the fallback", x.Verdict(), x.FromFallback())
	}
}
