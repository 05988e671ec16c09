package meter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// The timelines here drive admission and settlement with no HTTP at all:
// a memory store on a clock the test moves, a store that fails on cue, the
// per-node fallback, and a ledger that keeps what it is given.

// flaky is a Store that fails every call while down is set, as an
// unreachable Redis would (behind bucket.Guarded, which the meter never
// sees); otherwise it is the memory store it wraps.
type flaky struct {
	bucket.Store
	down atomic.Bool
}

var errDown = errors.New("store down")

func (f *flaky) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	if f.down.Load() {
		return bucket.Decision{}, errDown
	}
	return f.Store.Take(ctx, id, items)
}

func (f *flaky) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Reconcile(ctx, id, deltas)
}

// records is a ledger that keeps every record.
type records struct {
	mu sync.Mutex
	rs []ledger.Record
}

func (r *records) Write(rec ledger.Record) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rs = append(r.rs, rec)
	return true
}

func (r *records) all() []ledger.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ledger.Record(nil), r.rs...)
}

type timeline struct {
	t        *testing.T
	clock    *storetest.Clock
	mem      *bucket.Memory
	store    *flaky
	fallback *bucket.Fallback
	meter    *Meter
	policy   *policy.Policy
	ledger   *records
	reg      *prometheus.Registry
	alice    policy.Principal
	n        int
}

// newTimeline compiles limits (a config's limits: section) with alice's
// key sk-a (tenant acme) and gpt-4o-mini priced at $0.15 / $0.60 per
// million tokens, on a memory store whose clock starts at noon UTC on
// 2026-03-10, and a fallback for two nodes.
func newTimeline(t *testing.T, limits string) *timeline {
	t.Helper()
	return newTimelineModels(t, "", limits)
}

// newTimelineModels is newTimeline with models, more entries of the
// config's models: section (each line indented two spaces).
func newTimelineModels(t *testing.T, models, limits string) *timeline {
	t.Helper()
	c, err := config.Parse([]byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: alice, tenant: acme, plan: free}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
` + models + `limits:
` + limits))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	alice, ok := pol.Identify("sk-a")
	if !ok {
		t.Fatal("sk-a unknown")
	}
	clock := storetest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	fb := bucket.NewFallback(bucket.FallbackOptions{Nodes: 2, Memory: bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1}})
	t.Cleanup(func() { mem.Close(); fb.Close() })
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tl := &timeline{t: t, clock: clock, mem: mem, store: &flaky{Store: mem}, fallback: fb, policy: pol,
		ledger: &records{}, reg: reg, alice: alice}
	tl.meter, err = New(Options{Store: tl.store, Fallback: fb, Ledger: tl.ledger, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// admit asks for a gpt-4o-mini chat reserving in input and out output
// tokens.
func (tl *timeline) admit(in, out int64) *Exchange {
	tl.n++
	return tl.meter.Admit(Request{ID: "req-" + string(rune('a'+tl.n)), Principal: tl.alice, Policy: tl.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
}

// level is what a rule's bucket of alice holds now in store s.
func (tl *timeline) level(s bucket.Store, rule string) int64 {
	tl.t.Helper()
	for i := range tl.policy.Rules() {
		r := &tl.policy.Rules()[i]
		if r.Name != rule {
			continue
		}
		d, err := s.Take(context.Background(), "", []bucket.Item{{Key: r.Key(tl.alice), Limit: r.LimitAt(tl.clock.Now()), Cost: 0}})
		if err != nil {
			tl.t.Fatal(err)
		}
		return d.Buckets[0].Remaining
	}
	tl.t.Fatalf("no rule %q", rule)
	return 0
}

func (tl *timeline) advance(d time.Duration) { tl.clock.Set(tl.clock.Now().Add(d)) }

// Admit, settle with the reported usage, admit again: the reservation is
// taken at admission, reconciled to the usage at settlement, and the next
// request sees the reconciled level; a request the bucket cannot hold is
// denied with the exact wait, and admitted once that wait has passed.
func TestTimelineReserveReconcileDenyRefill(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`)
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v, want admitted", x.Verdict())
	}
	if got := tl.level(tl.mem, "tpm"); got != 500 {
		t.Fatalf("after admission: %d left, want 1000 − 500 reserved", got)
	}
	if !x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 120, OutputTokens: 30}, Status: 200}) {
		t.Fatal("first Settle did nothing")
	}
	if got := tl.level(tl.mem, "tpm"); got != 850 {
		t.Fatalf("after settlement: %d left, want 1000 − 150 used", got)
	}
	if x.Settle(Settlement{Source: spec.SourceRefund}) {
		t.Fatal("a second Settle acted")
	}
	if got := tl.level(tl.mem, "tpm"); got != 850 {
		t.Fatalf("after a second Settle: %d left, want 850 unchanged", got)
	}

	y := tl.admit(100, 800) // 900 > 850
	if y.Verdict() != Denied || y.DeniedBy() != 0 || y.Outcome(0) != OutcomeLimited {
		t.Fatalf("verdict %v by %d (%s), want denied by rule 0", y.Verdict(), y.DeniedBy(), y.Outcome(0))
	}
	if want := 3 * time.Second; y.RetryAfter() != want { // 50 tokens at 1000 per minute
		t.Fatalf("retry after %v, want %v", y.RetryAfter(), want)
	}
	if y.Settle(Settlement{Source: spec.SourceReserved}) {
		t.Fatal("a denied exchange was settled")
	}
	if got := tl.level(tl.mem, "tpm"); got != 850 {
		t.Fatalf("after a denial: %d left, want 850: a denial spends nothing", got)
	}
	tl.advance(3 * time.Second)
	if z := tl.admit(100, 800); z.Verdict() != Admitted {
		t.Fatalf("after the wait: %v, want admitted", z.Verdict())
	}
	if got := tl.level(tl.mem, "tpm"); got != 0 {
		t.Fatalf("after the third admission: %d left, want 0", got)
	}

	recs := tl.ledger.all()
	if len(recs) != 1 || recs[0].InputTokens != 120 || recs[0].OutputTokens != 30 || recs[0].Reserved != 500 ||
		recs[0].EstimatedOutputTokens != 400 || recs[0].ReservedUnit != "tokens" || recs[0].Status != 200 || recs[0].Model != "gpt-4o-mini" || recs[0].User != "alice" {
		t.Fatalf("ledger %+v, want one record of the settled request", recs)
	}
	// 120 × 0.15 + 30 × 0.60 µUSD = 18 + 18 = 36 µUSD
	if recs[0].CostMicroUSD != 36 {
		t.Fatalf("cost %d µUSD, want 36", recs[0].CostMicroUSD)
	}
}

// Each way a request can end settles as documented: an upstream error
// refunds every reservation, an answer whose usage is unknown keeps it (and
// is recorded at the estimate), a request that never reached the upstream
// is refunded and leaves no ledger record.
func TestTimelineSettlementOutcomes(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 10000}
  - {name: rpd, scope: user, unit: requests, quota: 100, period: day}
`)
	refund := tl.admit(100, 400)
	refund.Settle(Settlement{Source: spec.SourceRefund, Status: 502})
	if got := tl.level(tl.mem, "tpm"); got != 10000 {
		t.Fatalf("after a refund: %d tokens left, want all 10000", got)
	}
	if got := tl.level(tl.mem, "rpd"); got != 100 {
		t.Fatalf("after a refund: %d requests left, want all 100", got)
	}

	kept := tl.admit(100, 400)
	kept.Settle(Settlement{Source: spec.SourceReserved, Status: 200})
	if got := tl.level(tl.mem, "tpm"); got != 9500 {
		t.Fatalf("after an unknown usage: %d tokens left, want the 500 reserved kept", got)
	}

	aborted := tl.admit(100, 400)
	aborted.Settle(Settlement{Source: spec.SourceRefund, Unforwarded: true})
	if got := tl.level(tl.mem, "tpm"); got != 9500 {
		t.Fatalf("after an unforwarded request: %d tokens left, want 9500", got)
	}

	counted := tl.admit(100, 400)
	counted.Settle(Settlement{Source: spec.SourceCounted, Usage: spec.Usage{InputTokens: 100, OutputTokens: 7}, Status: 200})
	if got := tl.level(tl.mem, "tpm"); got != 9500-107 {
		t.Fatalf("after a counted stream: %d tokens left, want %d", got, 9500-107)
	}
	if got := tl.level(tl.mem, "rpd"); got != 98 {
		t.Fatalf("%d requests left, want 100 − 2 (the refunded and the unforwarded requests gave theirs back)", got)
	}

	recs := tl.ledger.all()
	if len(recs) != 3 {
		t.Fatalf("%d ledger records, want 3 (the unforwarded request writes none): %+v", len(recs), recs)
	}
	if r := recs[0]; r.Status != 502 || r.InputTokens != 0 || r.OutputTokens != 0 || r.CostMicroUSD != 0 {
		t.Errorf("refunded record %+v, want status 502, no tokens, no cost", r)
	}
	if r := recs[1]; r.InputTokens != 100 || r.OutputTokens != 400 || r.CostMicroUSD != 15+240 {
		t.Errorf("unknown-usage record %+v, want the estimate 100/400 at 255 µUSD", r)
	}
	if r := recs[2]; r.InputTokens != 100 || r.OutputTokens != 7 {
		t.Errorf("counted record %+v, want 100/7", r)
	}
}

// A request that is not weighed (an endpoint counted as a request only)
// costs one request and nothing in token or dollar limits, at admission
// and at settlement.
func TestTimelineUnweighedCountsAsARequest(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
  - {name: rpd, scope: user, unit: requests, quota: 10, period: day}
`)
	x := tl.meter.Admit(Request{ID: "files", Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI,
		Path: "/v1/files", Weighed: false})
	if x.Verdict() != Admitted || tl.level(tl.mem, "tpm") != 1000 || tl.level(tl.mem, "rpd") != 9 {
		t.Fatalf("%v, tpm %d, rpd %d: want admitted, 1000 tokens and 9 requests left", x.Verdict(), tl.level(tl.mem, "tpm"), tl.level(tl.mem, "rpd"))
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 500}, Status: 200})
	if tl.level(tl.mem, "tpm") != 1000 || tl.level(tl.mem, "rpd") != 9 {
		t.Fatalf("after settling: tpm %d, rpd %d; want 1000 and 9", tl.level(tl.mem, "tpm"), tl.level(tl.mem, "rpd"))
	}
}

// A dollar budget is charged the settled cost to the micro-dollar, and a
// request it cannot cover is denied until the period ends; one that costs
// more than the whole budget is too large.
func TestTimelineDollarBudget(t *testing.T) {
	tl := newTimeline(t, `  - {name: daily-usd, scope: tenant, unit: usd, quota: 0.001, period: day}
`)
	// 1000 input + 1000 output: 150 + 600 = 750 µUSD reserved of 1000.
	x := tl.admit(1000, 1000)
	if x.Verdict() != Admitted || tl.level(tl.mem, "daily-usd") != 250 {
		t.Fatalf("%v with %d µUSD left, want admitted with 250", x.Verdict(), tl.level(tl.mem, "daily-usd"))
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 1000, OutputTokens: 100}, Status: 200})
	if got := tl.level(tl.mem, "daily-usd"); got != 1000-150-60 {
		t.Fatalf("%d µUSD left, want %d", got, 1000-150-60)
	}
	y := tl.admit(1000, 2000) // 150 + 1200 = 1350 > 790
	if y.Verdict() != TooLarge || y.Outcome(0) != OutcomeTooLarge {
		t.Fatalf("%v, want too large: 1350 µUSD exceeds the 1000 budget", y.Verdict())
	}
	z := tl.admit(1000, 1100) // 150 + 660 = 810 > 790 left
	if z.Verdict() != Denied {
		t.Fatalf("%v, want denied", z.Verdict())
	}
	if want := 12 * time.Hour; z.RetryAfter() != want {
		t.Fatalf("retry after %v, want %v (midnight UTC)", z.RetryAfter(), want)
	}
	tl.advance(12 * time.Hour)
	if w := tl.admit(1000, 1100); w.Verdict() != Admitted {
		t.Fatalf("in the next period: %v, want admitted", w.Verdict())
	}
}

// With the store down, a fail-open rule is held by this node's fallback
// bucket (its share: half the limit on two nodes), the request is counted
// as fail_open, and its settlement is reconciled in the fallback; when the
// store is back, requests are judged by it again.
func TestTimelineFailOpenUsesTheFallback(t *testing.T) {
	tl := newTimeline(t, `  - {name: rpm, scope: user, unit: requests, rate: 10, per: 1m, on_failure: open}
  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m, on_failure: open}
`)
	tl.store.down.Store(true)
	x := tl.admit(100, 300)
	if x.Verdict() != Admitted || x.Outcome(200) != OutcomeFailOpen {
		t.Fatalf("%v (%s), want admitted fail_open", x.Verdict(), x.Outcome(200))
	}
	if got := tl.level(tl.fallback, "tpm"); got != 500-400 {
		t.Fatalf("fallback holds %d tokens, want 500 (the node's share) − 400", got)
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200})
	if got := tl.level(tl.fallback, "tpm"); got != 500-150 {
		t.Fatalf("after settlement the fallback holds %d, want %d: reconciled where it was taken", got, 500-150)
	}
	if y := tl.admit(100, 300); y.Verdict() != Denied || !y.FromFallback() {
		t.Fatalf("%v (from the fallback: %v), want denied by the fallback's 350 left", y.Verdict(), y.FromFallback())
	}
	tl.store.down.Store(false)
	if got := tl.level(tl.mem, "tpm"); got != 1000 {
		t.Fatalf("the store holds %d, want 1000: nothing was taken there while it was down", got)
	}
	z := tl.admit(100, 300)
	if z.Verdict() != Admitted || z.Outcome(200) != OutcomeAllowed || tl.level(tl.mem, "tpm") != 600 || z.FromFallback() {
		t.Fatalf("store back: %v (%s), %d left; want allowed by the store with 600 left", z.Verdict(), z.Outcome(200), tl.level(tl.mem, "tpm"))
	}
}

// With the store down, one fail-closed rule among the request's refuses
// it: nothing is taken from the fallback either, and the exchange names
// the rule.
func TestTimelineFailClosed(t *testing.T) {
	tl := newTimeline(t, `  - {name: rpm, scope: user, unit: requests, rate: 10, per: 1m, on_failure: open}
  - {name: budget, scope: tenant, unit: usd, quota: 10, period: month, on_failure: closed}
`)
	tl.store.down.Store(true)
	x := tl.admit(100, 300)
	if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "budget" || x.Outcome(0) != OutcomeFailClosed {
		t.Fatalf("%v closed by %v, want fail-closed by budget", x.Verdict(), x.ClosedBy())
	}
	if x.Settle(Settlement{Source: spec.SourceReserved}) {
		t.Fatal("a fail-closed exchange was settled")
	}
	if got := tl.level(tl.fallback, "rpm"); got != 5 {
		t.Fatalf("fallback rpm holds %d, want its full share 5", got)
	}
	if len(tl.ledger.all()) != 0 {
		t.Fatal("a refused request was written to the ledger")
	}
}

// A take the store refuses as invalid is a bug, never an outage: the
// request is refused, not admitted past the limit.
func TestTimelineInvalidTakeIsRefused(t *testing.T) {
	tl := newTimeline(t, `  - {name: rpm, scope: user, unit: requests, rate: 10, per: 1m, on_failure: open}
`)
	tl.meter.opt.Store, tl.meter.statuses = invalidStore{}, nil // as New would make it
	x := tl.admit(1, 1)
	if x.Verdict() != Broken || x.Outcome(0) != OutcomeInternalError {
		t.Fatalf("%v (%s), want broken / internal_error", x.Verdict(), x.Outcome(0))
	}
}

type invalidStore struct{ bucket.Store }

func (invalidStore) Take(context.Context, string, []bucket.Item) (bucket.Decision, error) {
	return bucket.Decision{}, bucket.ErrInvalid
}

// Two rules, the second one short: the denial takes nothing from the
// first (two-phase), and the denying rule is the one reported.
func TestTimelineDenialSpendsNothing(t *testing.T) {
	tl := newTimeline(t, `  - {name: roomy, scope: user, unit: tokens, rate: 1000, per: 1m}
  - {name: tight, scope: tenant, unit: tokens, rate: 100, per: 1m}
`)
	x := tl.admit(50, 100)
	if x.Verdict() != TooLarge || x.Rules()[x.DeniedBy()].Rule.Name != "tight" || !x.Rules()[x.DeniedBy()].Denied {
		t.Fatalf("%v by %d, want too large for tight", x.Verdict(), x.DeniedBy())
	}
	if got := tl.level(tl.mem, "roomy"); got != 1000 {
		t.Fatalf("roomy holds %d, want 1000: a denial spends nothing", got)
	}
}

// Budget warnings fire on spend, never on a reservation: the crossing is
// logged and counted once per period when a settled request's real cost
// takes the quota past a warn_at threshold, and the header reports the use
// before each request (settled spend and other requests in flight).
func TestTimelineBudgetWarning(t *testing.T) {
	tl := newTimeline(t, `  - {name: daily, scope: user, unit: tokens, quota: 1000, period: day, warn_at: [0.5, 0.9]}
`)
	counted := func() float64 { return testCounter(t, tl.reg, "llmguard_budget_warnings_total") }
	settle := func(x *Exchange, in, out int64) {
		t.Helper()
		if !x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: in, OutputTokens: out}, Status: 200}) {
			t.Fatal("not settled")
		}
	}
	// step 1: 400 reserved, 150 spent.
	x := tl.admit(100, 300)
	if w := x.Warnings(); len(w) != 0 {
		t.Fatalf("step 1: warnings %v before any spend", w)
	}
	settle(x, 100, 50)
	// step 2 (a large reservation): 150 spent and 700 reserved is 85%,
	// past 50%, but only 120 is spent: no warning, nothing counted.
	x = tl.admit(100, 600)
	if w := x.Warnings(); len(w) != 0 || counted() != 0 {
		t.Fatalf("step 2: warnings %v, counted %v on a reservation", w, counted())
	}
	settle(x, 100, 20)
	if counted() != 0 {
		t.Fatalf("step 2: counted %v at 27%% spent", counted())
	}
	// step 3: 270 spent before; this one spends 300: 57% crosses 50%.
	x = tl.admit(100, 100)
	if w := x.Warnings(); len(w) != 0 {
		t.Fatalf("step 3: warnings %v at 27%% spent", w)
	}
	settle(x, 200, 100)
	if counted() != 1 {
		t.Fatalf("step 3: budget_warnings_total = %v after spend crossed 50%%, want 1", counted())
	}
	// step 4: the header reports the use before the request; the same
	// threshold is not counted again.
	x = tl.admit(10, 10)
	if w := x.Warnings(); len(w) != 1 || w[0] != "daily; used=0.57" {
		t.Fatalf("step 4: warnings %v, want daily; used=0.57", w)
	}
	settle(x, 10, 10)
	if counted() != 1 {
		t.Fatalf("step 4: budget_warnings_total = %v, want still 1", counted())
	}
	// step 5: a refund spends nothing and crosses nothing, whatever it
	// reserved.
	x = tl.admit(100, 300)
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	if counted() != 1 {
		t.Fatalf("step 5: budget_warnings_total = %v after a refund, want 1", counted())
	}
}

// A request whose spend takes a quota past several warn_at thresholds at
// once reports each of them (once per period), where only the highest
// used to be logged and counted.
func TestTimelineBudgetWarningManyAtOnce(t *testing.T) {
	tl := newTimeline(t, `  - {name: daily, scope: user, unit: tokens, quota: 1000, period: day, warn_at: [0.5, 0.8, 0.95]}
`)
	counted := func() float64 { return testCounter(t, tl.reg, "llmguard_budget_warnings_total") }
	x := tl.admit(100, 800)
	if !x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 740}, Status: 200}) {
		t.Fatal("not settled")
	}
	if counted() != 2 {
		t.Fatalf("budget_warnings_total = %v after one request spent 84%%, want 2 (0.5 and 0.8)", counted())
	}
	x = tl.admit(10, 150)
	if !x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 10, OutputTokens: 110}, Status: 200}) {
		t.Fatal("not settled")
	}
	if counted() != 3 {
		t.Fatalf("budget_warnings_total = %v after 96%%, want 3: 0.95 once, 0.5 and 0.8 not again", counted())
	}
}

// testCounter sums a counter family's series.
func testCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A dated snapshot is its priced model for the rules too: a rule on
// gpt-4o-mini holds gpt-4o-mini-2024-07-18.
func TestTimelineSnapshotsMeetTheirModelsRules(t *testing.T) {
	tl := newTimeline(t, `  - {name: mini-hourly, scope: user, unit: requests, rate: 1, per: 1h, models: [gpt-4o-mini]}
`)
	admit := func(model string) Verdict {
		tl.n++
		return tl.meter.Admit(Request{ID: fmt.Sprintf("snap-%d", tl.n), Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI,
			Path: "/v1/chat/completions", Model: model, Weighed: true, Estimate: spec.Usage{InputTokens: 1, OutputTokens: 1}}).Verdict()
	}
	if v := admit("gpt-4o-mini"); v != Admitted {
		t.Fatalf("first: %v", v)
	}
	if v := admit("gpt-4o-mini-2024-07-18"); v != Denied {
		t.Fatalf("the snapshot: %v, want denied by the model's rule", v)
	}
}

// The ledger record carries the token reservation whatever the unit of the
// tightest limit: under a requests limit Reserved is 1 (request), and
// finance still reads the output reserved, in tokens, beside the input
// estimate.
func TestLedgerRecordsTheTokenReservation(t *testing.T) {
	tl := newTimeline(t, `  - {name: rpm, scope: user, unit: requests, rate: 1, per: 1m, burst: 1}
`)
	x := tl.admit(120, 400)
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v, want admitted", x.Verdict())
	}
	x.Settle(Settlement{Source: spec.SourceReserved, Status: 200})
	recs := tl.ledger.all()
	if len(recs) != 1 {
		t.Fatalf("ledger %+v, want one record", recs)
	}
	r := recs[0]
	if r.Reserved != 1 || r.ReservedUnit != "requests" {
		t.Fatalf("reserved %d %s, want 1 requests (the tightest limit's unit)", r.Reserved, r.ReservedUnit)
	}
	if r.EstimatedInputTokens != 120 || r.EstimatedOutputTokens != 400 {
		t.Fatalf("estimated input %d, output %d tokens, want 120 and 400", r.EstimatedInputTokens, r.EstimatedOutputTokens)
	}
}
