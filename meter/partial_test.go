package meter

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/spec"
)

// halfDown is a Store over a memory store in which the buckets whose keys
// hold down (a hash tag, "{global}") live on a Redis Cluster master that
// is down while the others serve theirs: a take made with
// bucket.WithPartial is served for the other keys and answered with a
// *bucket.PartialError naming the failed items, as bucket.Redis and
// bucket.Guarded answer it; any other take with a key on it fails whole,
// and so do a Reconcile or Void with such a key. It counts the Voids.
type halfDown struct {
	bucket.Store
	down string
	// more are further parts of keys on down masters (a sharded rule's
	// shard tags, "{global:2}").
	more  []string
	voids atomic.Int32
}

func (h *halfDown) isDown(key string) bool {
	return strings.Contains(key, h.down) || slices.ContainsFunc(h.more, func(m string) bool { return strings.Contains(key, m) })
}

func (h *halfDown) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	var failed, at []int
	var served []bucket.Item
	for i, it := range items {
		if h.isDown(it.Key) {
			failed = append(failed, i)
			continue
		}
		served, at = append(served, it), append(at, i)
	}
	if failed == nil {
		return h.Store.Take(ctx, id, items)
	}
	if !bucket.PartialAllowed(ctx) || served == nil {
		return bucket.Decision{}, errDown
	}
	sd, err := h.Store.Take(ctx, id, served)
	if err != nil {
		return sd, err
	}
	d := bucket.Decision{Allowed: sd.Allowed, DeniedBy: -1, TooLarge: sd.TooLarge, RetryAfter: sd.RetryAfter, Buckets: make([]bucket.Status, len(items))}
	if !sd.Allowed {
		d.DeniedBy = at[sd.DeniedBy]
	}
	for j, st := range sd.Buckets {
		d.Buckets[at[j]] = st
	}
	return d, &bucket.PartialError{Failed: failed, Err: errDown}
}

func (h *halfDown) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	for _, d := range deltas {
		if h.isDown(d.Key) {
			return errDown
		}
	}
	return h.Store.Reconcile(ctx, id, deltas)
}

func (h *halfDown) Void(ctx context.Context, id string, items []bucket.Item) error {
	for _, it := range items {
		if h.isDown(it.Key) {
			return errDown
		}
	}
	h.voids.Add(1)
	return h.Store.Void(ctx, id, items)
}

// newHalfDown is newTimeline over a halfDown store whose "{global}" keys
// fail.
func newHalfDown(t *testing.T, limits string) (*timeline, *halfDown) {
	t.Helper()
	tl := newTimeline(t, limits)
	hd := &halfDown{Store: tl.mem, down: "{global}"}
	tl.meter.opt.Store, tl.meter.statuses = hd, nil // as New would make it
	return tl, hd
}

// failures is llmguard_store_failure_decisions_total{limit, decision}.
func (tl *timeline) failures(limit, decision string) float64 {
	return testutil.ToFloat64(tl.meter.opt.Metrics.failures.WithLabelValues(limit, decision))
}

// A request whose tenant bucket is on a live master and whose global
// bucket is on a dead one (fail-open) is taken in the store for the
// tenant's rule and in the node's fallback for the global rule, each
// settled where it was taken; only the global rule counts a fail_open
// decision.
func TestPartialFailOpenRuleByRule(t *testing.T) {
	tl, _ := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4000, per: 1m, on_failure: open}
`)
	x := tl.admit(100, 300)
	if x.Verdict() != Admitted || x.Outcome(200) != OutcomeFailOpen || !x.FromFallback() {
		t.Fatalf("step 1: %v (%s, from the fallback %v), want admitted fail_open", x.Verdict(), x.Outcome(200), x.FromFallback())
	}
	if r := x.Rules(); len(r) != 2 || r[0].Fallback || !r[1].Fallback {
		t.Fatalf("step 1: rules %+v, want tpm from the store and all-tpm from the fallback", r)
	}
	if got := tl.level(tl.mem, "tpm"); got != 1000-400 {
		t.Fatalf("step 1: the store's tpm holds %d, want 1000 − 400: the live master charged", got)
	}
	if got := tl.level(tl.fallback, "all-tpm"); got != 2000-400 {
		t.Fatalf("step 1: the fallback's all-tpm holds %d, want 2000 (its share) − 400", got)
	}
	if got := tl.level(tl.fallback, "tpm"); got != 500 {
		t.Fatalf("step 1: the fallback's tpm holds %d, want its full 500: the store judged that rule", got)
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200})
	if got := tl.level(tl.mem, "tpm"); got != 1000-150 {
		t.Fatalf("step 2 (settled): the store's tpm holds %d, want 1000 − 150", got)
	}
	if got := tl.level(tl.fallback, "all-tpm"); got != 2000-150 {
		t.Fatalf("step 2 (settled): the fallback's all-tpm holds %d, want 2000 − 150", got)
	}
	if got := tl.level(tl.mem, "all-tpm"); got != 4000 {
		t.Fatalf("step 2 (settled): the dead master's all-tpm holds %d, want 4000: nothing reached it", got)
	}
	if open, closed := tl.failures("all-tpm", OutcomeFailOpen), tl.failures("tpm", OutcomeFailOpen); open != 1 || closed != 0 {
		t.Fatalf("step 2: fail_open decisions all-tpm %v, tpm %v; want 1 and 0", open, closed)
	}
}

// A fail-closed rule on the dead master refuses the request, and what
// the live master took is given back: a refusal spends nothing.
func TestPartialFailClosedGivesBack(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4000, per: 1m, on_failure: closed}
`)
	x := tl.admit(100, 300)
	if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "all-tpm" {
		t.Fatalf("%v closed by %v, want fail-closed by all-tpm", x.Verdict(), x.ClosedBy())
	}
	if got := tl.level(tl.mem, "tpm"); got != 1000 {
		t.Fatalf("the store's tpm holds %d, want 1000: the live master's take given back", got)
	}
	if hd.voids.Load() != 1 {
		t.Fatalf("%d voids, want 1 (the live master's take)", hd.voids.Load())
	}
	if got := tl.level(tl.fallback, "tpm"); got != 500 {
		t.Fatalf("the fallback's tpm holds %d, want 500: nothing taken there", got)
	}
	if c := tl.failures("all-tpm", OutcomeFailClosed); c != 1 {
		t.Fatalf("fail_closed decisions of all-tpm: %v, want 1", c)
	}
}

// The fallback denies the dead master's fail-open rule: the request is
// denied by that rule (from the fallback), and the live master's take is
// given back.
func TestPartialFallbackDenialGivesBack(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 10000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4000, per: 1m, on_failure: open}
`)
	if x := tl.admit(100, 1500); x.Verdict() != Admitted { // 1600 of the fallback's 2000
		t.Fatalf("step 1: %v, want admitted", x.Verdict())
	}
	y := tl.admit(100, 400) // 500: fits Redis's 4000, not the fallback's 400 left
	if y.Verdict() != Denied || y.DeniedBy() != 1 || !y.FromFallback() {
		t.Fatalf("step 2: %v by %d (from the fallback %v), want denied by all-tpm from the fallback", y.Verdict(), y.DeniedBy(), y.FromFallback())
	}
	if got := tl.level(tl.mem, "tpm"); got != 10000-1600 {
		t.Fatalf("step 2: the store's tpm holds %d, want 10000 − 1600: the denied request's take given back", got)
	}
	if hd.voids.Load() != 1 {
		t.Fatalf("step 2: %d voids, want 1", hd.voids.Load())
	}
	if got := tl.level(tl.fallback, "all-tpm"); got != 400 {
		t.Fatalf("step 2: the fallback's all-tpm holds %d, want 400: a denial spends nothing", got)
	}
}

// The live master denies: the request is denied by its rule, as by any
// take, the fallback is not asked, and nothing is held.
func TestPartialServedDenial(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4000, per: 1m, on_failure: closed}
`)
	if x := tl.admit(100, 500); x.Verdict() != FailClosed { // all-tpm fails closed
		t.Fatalf("step 1: %v, want fail-closed", x.Verdict())
	}
	tl.meter.opt.Store.(*halfDown).down = "{nowhere}" // the master is back for a request
	if x := tl.admit(100, 500); x.Verdict() != Admitted {
		t.Fatalf("step 2: %v, want admitted", x.Verdict())
	}
	tl.meter.opt.Store.(*halfDown).down = "{global}"
	voids := hd.voids.Load()
	x := tl.admit(100, 400) // 500 > 400 left
	if x.Verdict() != Denied || x.DeniedBy() != 0 || x.FromFallback() {
		t.Fatalf("step 3: %v by %d (from the fallback %v), want denied by tpm from the store", x.Verdict(), x.DeniedBy(), x.FromFallback())
	}
	if got := tl.level(tl.mem, "tpm"); got != 400 {
		t.Fatalf("step 3: the store's tpm holds %d, want 400", got)
	}
	if got := tl.level(tl.fallback, "all-tpm"); got != 2000 || hd.voids.Load() != voids {
		t.Fatalf("step 3: the fallback's all-tpm holds %d, %d more voids; want 2000 and none", got, hd.voids.Load()-voids)
	}
	// Judged by the served rule alone: the failed rule's zero status is not
	// among the rules the answer's limit headers read.
	if r := x.Rules(); len(r) != 1 || r[0].Rule.Name != "tpm" || r[0].Status.Remaining != 400 {
		t.Fatalf("step 3: rules %+v, want tpm's alone, with its status", r)
	}
}

// The live master denies by a rule that comes after the failed one (the
// tenant's master is down, the global rule's denies): the failed rule is
// dropped and the denial still names the denying rule.
func TestPartialServedDenialAfterAFailedRule(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 4000, per: 1m, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 1000, per: 1m, on_failure: open}
`)
	hd.down = "{acme}"
	if x := tl.admit(100, 500); x.Verdict() != Admitted { // tpm in the fallback, all-tpm in the store
		t.Fatalf("step 1: %v, want admitted", x.Verdict())
	}
	x := tl.admit(100, 400) // 500 > all-tpm's 400 left
	if x.Verdict() != Denied || x.FromFallback() {
		t.Fatalf("%v (from the fallback %v), want denied by all-tpm from the store", x.Verdict(), x.FromFallback())
	}
	r := x.Rules()
	if len(r) != 1 || x.DeniedBy() != 0 || r[0].Rule.Name != "all-tpm" || !r[0].Denied || r[0].Status.Remaining != 400 {
		t.Fatalf("rules %+v denied by %d, want all-tpm's alone (400 remaining), denying", r, x.DeniedBy())
	}
}

// Only the quota the fallback judged is charged back to the store once it
// returns; the live master's quota was charged in Redis already.
func TestPartialChargesOnlyTheFallbackRule(t *testing.T) {
	tl, _ := newHalfDown(t, `  - {name: day, scope: tenant, unit: tokens, quota: 100000, period: day, on_failure: open}
  - {name: org-day, scope: global, unit: tokens, quota: 1000000, period: day, on_failure: open}
`)
	ch := &charged{}
	tl.meter.opt.Charges = ch
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted {
		t.Fatalf("%v, want admitted", x.Verdict())
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 120, OutputTokens: 31}, Status: 200})
	ds := ch.take()
	if len(ds) != 1 || !strings.Contains(ds[0].Key, "{global}") || ds[0].Units != 151 {
		t.Fatalf("charged %+v, want 151 tokens on org-day only", ds)
	}
	if got := tl.level(tl.mem, "day"); got != 100000-151 {
		t.Fatalf("the store's day quota holds %d, want 100000 − 151", got)
	}
}
