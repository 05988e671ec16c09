package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// errRefused is what a store that is down returns: a refused connection.
var errRefused = fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED)

// flakyStore is a Store and BatchReconciler over a Memory that fails with
// errRefused while down, counts the calls that reach it, and counts per
// request id the reconciliations it applied.
type flakyStore struct {
	mem   *bucket.Memory
	down  atomic.Bool
	calls atomic.Int64
	// block, when set, makes every call wait for its context to end and
	// return its error (a store that hangs).
	block atomic.Bool
	// poison names a request id that always fails, even while up.
	poison string

	mu      sync.Mutex
	applied map[string]int
}

func newFlaky(t *testing.T) *flakyStore {
	frozen := time.Unix(1_700_000_000, 0)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return frozen }, SweepEvery: -1})
	return &flakyStore{mem: m, applied: map[string]int{}}
}

func (f *flakyStore) fail(ctx context.Context) error {
	f.calls.Add(1)
	if f.block.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.down.Load() {
		return errRefused
	}
	return nil
}

func (f *flakyStore) Take(ctx context.Context, requestID string, items []bucket.Item) (bucket.Decision, error) {
	if err := f.fail(ctx); err != nil {
		return bucket.Decision{}, err
	}
	return f.mem.Take(ctx, requestID, items)
}

func (f *flakyStore) Void(ctx context.Context, id string, items []bucket.Item) error {
	deltas := make([]bucket.Delta, len(items))
	for i, it := range items {
		deltas[i] = bucket.Delta{Key: it.Key, Limit: it.Limit, Units: -it.Cost}
	}
	return f.ReconcileBatch(ctx, []bucket.Reconciliation{{RequestID: id, Deltas: deltas, Void: true}})[0]
}

func (f *flakyStore) Reconcile(ctx context.Context, id string, d []bucket.Delta) error {
	return f.ReconcileBatch(ctx, []bucket.Reconciliation{{RequestID: id, Deltas: d}})[0]
}

func (f *flakyStore) ReconcileBatch(ctx context.Context, batch []bucket.Reconciliation) []error {
	errs := make([]error, len(batch))
	if err := f.fail(ctx); err != nil {
		// As Redis, refuse invalid deltas before trying the store.
		for i, rc := range batch {
			errs[i] = err
			for _, d := range rc.Deltas {
				if verr := d.Limit.Validate(); verr != nil {
					errs[i] = verr
				}
			}
		}
		return errs
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, rc := range batch {
		if rc.RequestID == f.poison && f.poison != "" {
			errs[i] = errors.New("ERR WRONGTYPE")
			continue
		}
		if rc.Void {
			items := make([]bucket.Item, len(rc.Deltas))
			for j, d := range rc.Deltas {
				items[j] = bucket.Item{Key: d.Key, Limit: d.Limit, Cost: -d.Units}
			}
			errs[i] = f.mem.Void(ctx, rc.RequestID, items)
			continue
		}
		if errs[i] = f.mem.Reconcile(ctx, rc.RequestID, rc.Deltas); errs[i] == nil {
			f.applied[rc.RequestID]++
		}
	}
	return errs
}

func (f *flakyStore) appliedCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.applied)
}

var guardLimit = bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}

func item(key string, cost int64) []bucket.Item {
	return []bucket.Item{{Key: key, Limit: guardLimit, Cost: cost}}
}

// transitions records a Guarded's state changes: "from->to", prefixed
// with "<master>: " for a breaker of a named master.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(master string, from, to bucket.BreakerState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if master != "" {
		master += ": "
	}
	tr.got = append(tr.got, master+from.String()+"->"+to.String())
}

func (tr *transitions) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.got)
}

// waitState polls g until it reports want, failing t after a bounded wait.
func waitState(t *testing.T, g *bucket.Guarded, want bucket.BreakerState, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for g.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("breaker still %v after %v, want %v", g.State(), within, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGuardedOpensAndRejects shows the breaker opening once failures reach
// half of at least MinCalls (4) calls — one success then three failures —
// then failing every call at once, without calling the store, with
// ErrUnavailable that wraps the cause.
func TestGuardedOpensAndRejects(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	var tr transitions
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 4, OpenFor: time.Hour, OnStateChange: tr.record, Timeout: time.Hour, ReconcileTimeout: time.Hour})

	if d, err := g.Take(ctx, "", item("k", 1)); err != nil || !d.Allowed {
		t.Fatalf("take while up: %+v, %v", d, err)
	}
	f.down.Store(true)
	for i := range 3 {
		if g.State() != bucket.BreakerClosed {
			t.Fatalf("failure %d: breaker %v before the third failure", i, g.State())
		}
		_, err := g.Take(ctx, "", item("k", 1))
		if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("failure %d: %v, want ErrUnavailable wrapping ECONNREFUSED", i, err)
		}
	}
	if g.State() != bucket.BreakerOpen {
		t.Fatalf("breaker %v after 3 failures, want open", g.State())
	}
	reached := f.calls.Load()

	for i := range 100 {
		_, err := g.Take(ctx, "", item("k", 1))
		if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("take %d while open: %v, want ErrUnavailable wrapping the last failure", i, err)
		}
		err = g.Reconcile(ctx, "r", []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}})
		if !errors.Is(err, bucket.ErrUnavailable) {
			t.Fatalf("reconcile %d while open: %v, want ErrUnavailable", i, err)
		}
	}
	if n := f.calls.Load() - reached; n != 0 {
		t.Fatalf("%d calls reached the store while the breaker was open", n)
	}
	// A caller's mistake is still reported as such while open.
	if _, err := g.Take(ctx, "", []bucket.Item{{Key: "k", Limit: guardLimit, Cost: -1}}); !errors.Is(err, bucket.ErrInvalid) || errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("invalid take while open: %v, want ErrInvalid only", err)
	}

	s := g.Stats()
	if take := s.Calls[bucket.OpTake]; take[bucket.ResultInvalid] != 1 {
		t.Errorf("invalid takes = %d, want 1", take[bucket.ResultInvalid])
	}
	if s.State != bucket.BreakerOpen || s.Opened != 1 {
		t.Errorf("stats state %v opened %d, want open, 1", s.State, s.Opened)
	}
	take := s.Calls[bucket.OpTake]
	if take[bucket.ResultOK] != 1 || take[bucket.ResultFailed] != 3 || take[bucket.ResultRejected] != 100 {
		t.Errorf("take calls by result = %v, want ok 1, failed 3, rejected 100", take)
	}
	if r := s.Calls[bucket.OpReconcile][bucket.ResultRejected]; r != 100 {
		t.Errorf("reconciles rejected = %d, want 100", r)
	}
	if s.Errors[bucket.KindConnection] != 3 || s.Errors[bucket.KindTimeout] != 0 || s.Errors[bucket.KindOther] != 0 {
		t.Errorf("errors by kind = %v, want 3 connection", s.Errors)
	}
	if got := tr.list(); !slices.Equal(got, []string{"closed->open"}) {
		t.Errorf("transitions %v, want [closed->open]", got)
	}
}

// TestGuardedHalfOpens shows the breaker half-opening after OpenFor,
// letting one probe through while rejecting the others, reopening when
// the probe fails and closing when one succeeds.
func TestGuardedHalfOpens(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	var tr transitions
	const openFor = 30 * time.Millisecond
	// Timeout ends step 2's hanging probe; it is long enough that no
	// other call misses it on a loaded machine (the default, 50 ms, did).
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 2, OpenFor: openFor, OnStateChange: tr.record, Timeout: time.Second})

	f.down.Store(true)
	for range 2 {
		g.Take(ctx, "", item("k", 1))
	}
	if g.State() != bucket.BreakerOpen {
		t.Fatalf("breaker %v after 2 failures, want open", g.State())
	}

	// step 1 (failed probe): half-open, one failure reopens it.
	waitState(t, g, bucket.BreakerHalfOpen, openFor+2*time.Second)
	before := f.calls.Load()
	if _, err := g.Take(ctx, "", item("k", 1)); !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("step 1: probe while down: %v, want ErrUnavailable", err)
	}
	if f.calls.Load() != before+1 {
		t.Fatalf("step 1: the probe did not reach the store")
	}
	// The failed probe's own transition, not State(): a pause longer than
	// openFor before the read (a loaded machine) would find the breaker
	// half-open again.
	if got := tr.list(); len(got) == 0 || got[len(got)-1] != "half-open->open" {
		t.Fatalf("step 1: transitions %v after a failed probe, want the last half-open->open", got)
	}

	// step 2 (probe in flight): while the one probe hangs, other calls are
	// rejected without reaching the store.
	waitState(t, g, bucket.BreakerHalfOpen, openFor+2*time.Second)
	f.down.Store(false)
	f.block.Store(true)
	probe := make(chan error)
	go func() {
		_, err := g.Take(ctx, "", item("k", 1))
		probe <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for f.calls.Load() == before+1 {
		if time.Now().After(deadline) {
			t.Fatal("step 2: the probe never reached the store")
		}
		time.Sleep(time.Millisecond)
	}
	inFlight := f.calls.Load()
	if _, err := g.Take(ctx, "", item("k", 1)); !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("step 2: take beside the probe: %v, want ErrUnavailable", err)
	}
	if f.calls.Load() != inFlight {
		t.Fatal("step 2: a second call reached the store while half-open")
	}
	if err := <-probe; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("step 2: hanging probe: %v, want its deadline", err)
	}
	f.block.Store(false)

	// step 3 (recovery): the next probe succeeds and closes the breaker.
	waitState(t, g, bucket.BreakerHalfOpen, openFor+2*time.Second)
	if d, err := g.Take(ctx, "", item("k", 1)); err != nil || !d.Allowed {
		t.Fatalf("step 3: probe while up: %+v, %v", d, err)
	}
	if g.State() != bucket.BreakerClosed {
		t.Fatalf("step 3: breaker %v after a successful probe, want closed", g.State())
	}
	want := []string{
		"closed->open", "open->half-open", "half-open->open",
		"open->half-open", "half-open->open",
		"open->half-open", "half-open->closed",
	}
	if got := tr.list(); !slices.Equal(got, want) {
		t.Errorf("transitions\n got %v\nwant %v", got, want)
	}
	if n := g.Stats().Errors[bucket.KindTimeout]; n != 1 {
		t.Errorf("timeouts = %d, want 1 (the hanging probe)", n)
	}
}

// TestGuardedInvalidIsNotAFailure shows ErrInvalid passing through as is,
// without ErrUnavailable, neither tripping the breaker nor counting as a
// success; and a denial counting as a success. With MinCalls 4 and a ratio
// of 0.6: ok, fail, deny, fail is 2 failures of 4 (closed); one more
// failure makes 3 of 5 (open), unless the invalid call between counted as
// a success (3 of 6).
func TestGuardedInvalidIsNotAFailure(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 4, FailureRatio: 0.6, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})

	invalid := []bucket.Item{{Key: "k", Limit: guardLimit, Cost: -1}}
	for i := range 10 {
		_, err := g.Take(ctx, "", invalid)
		if !errors.Is(err, bucket.ErrInvalid) || errors.Is(err, bucket.ErrUnavailable) {
			t.Fatalf("invalid take %d: %v, want ErrInvalid only", i, err)
		}
		err = g.Reconcile(ctx, "r", []bucket.Delta{{Key: "k", Units: 1}})
		if !errors.Is(err, bucket.ErrInvalid) || errors.Is(err, bucket.ErrUnavailable) {
			t.Fatalf("invalid reconcile %d: %v, want ErrInvalid only", i, err)
		}
	}
	if g.State() != bucket.BreakerClosed {
		t.Fatalf("breaker %v after invalid calls, want closed", g.State())
	}

	// A denial is a success: ok, fail, deny, fail is 2 failures of 4 and
	// stays closed.
	if d, err := g.Take(ctx, "", item("full", 100)); err != nil || !d.Allowed {
		t.Fatalf("take the whole bucket: %+v, %v", d, err)
	}
	f.down.Store(true)
	g.Take(ctx, "", item("full", 1))
	f.down.Store(false)
	if d, err := g.Take(ctx, "", item("full", 1)); err != nil || d.Allowed {
		t.Fatalf("take from an empty bucket: %+v, %v; want a denial", d, err)
	}
	f.down.Store(true)
	g.Take(ctx, "", item("full", 1))
	if g.State() != bucket.BreakerClosed {
		t.Fatalf("breaker %v: a denial between two failures counted as a failure", g.State())
	}

	// An invalid call between failures counts neither way: the next
	// failure makes 3 of 5.
	f.down.Store(false)
	if _, err := g.Take(ctx, "", invalid); !errors.Is(err, bucket.ErrInvalid) {
		t.Fatal(err)
	}
	f.down.Store(true)
	g.Take(ctx, "", item("full", 1))
	if g.State() != bucket.BreakerOpen {
		t.Fatalf("breaker %v: an invalid call counted as a success", g.State())
	}
	s := g.Stats()
	if s.Calls[bucket.OpTake][bucket.ResultInvalid] != 11 || s.Calls[bucket.OpReconcile][bucket.ResultInvalid] != 10 {
		t.Errorf("invalid calls = %v", s.Calls)
	}
}

// TestGuardedOwnDeadline shows every call getting the Guarded's deadline
// whatever the caller's context: a hanging store is left at Timeout (a
// caller without a deadline still gets an answer), and a caller's context
// already cancelled does not stop a call.
func TestGuardedOwnDeadline(t *testing.T) {
	f := newFlaky(t)
	var calls []bucket.Call
	var mu sync.Mutex
	g := bucket.NewGuarded(f, bucket.GuardOptions{Timeout: 5 * time.Millisecond, MinCalls: 100,
		OnCall: func(c bucket.Call) { mu.Lock(); calls = append(calls, c); mu.Unlock() }})

	f.block.Store(true)
	_, err := g.Take(context.Background(), "", item("k", 1))
	if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take from a hanging store: %v, want ErrUnavailable wrapping the deadline", err)
	}
	f.block.Store(false)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := g.Take(cancelled, "", item("k", 1)); err != nil || !d.Allowed {
		t.Fatalf("take with a cancelled context: %+v, %v; want it served", d, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("OnCall saw %d calls, want 2", len(calls))
	}
	if c := calls[0]; c.Op != bucket.OpTake || c.Result != bucket.ResultFailed || c.Kind != bucket.KindTimeout || c.Duration < 5*time.Millisecond {
		t.Errorf("hanging call reported as %+v", c)
	}
	// The failed call carries the store's own error, for the log line
	// "store take failed" (which said only kind=other for a CLUSTERDOWN).
	if c := calls[0]; !errors.Is(c.Err, context.DeadlineExceeded) {
		t.Errorf("hanging call's Err = %v, want the deadline", c.Err)
	}
	if c := calls[1]; c.Result != bucket.ResultOK || c.Kind != bucket.KindNone || c.Err != nil {
		t.Errorf("served call reported as %+v", c)
	}
}

// TestGuardedBatch shows a batch in which one element fails while the
// others are applied: the store is up, the breaker counts a success and
// that element's error is its own; a batch that fails whole is
// ErrUnavailable for every element.
func TestGuardedBatch(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	f.poison = "bad"
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 1, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	delta := []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}}
	batch := []bucket.Reconciliation{
		{RequestID: "a", Deltas: delta},
		{RequestID: "bad", Deltas: delta},
		{RequestID: "inv", Deltas: []bucket.Delta{{Key: "k", Units: 1}}},
	}
	errs := g.ReconcileBatch(ctx, batch)
	if errs[0] != nil || errs[1] == nil || errors.Is(errs[1], bucket.ErrUnavailable) || !errors.Is(errs[2], bucket.ErrInvalid) {
		t.Fatalf("mixed batch: %v; want nil, an error of its own, ErrInvalid", errs)
	}
	if g.State() != bucket.BreakerClosed {
		t.Fatalf("breaker %v after a batch the store served", g.State())
	}

	f.down.Store(true)
	batch[0].RequestID = "b"
	errs = g.ReconcileBatch(ctx, batch)
	if !errors.Is(errs[0], bucket.ErrUnavailable) || !errors.Is(errs[1], bucket.ErrUnavailable) || !errors.Is(errs[2], bucket.ErrInvalid) {
		t.Fatalf("batch while down: %v; want ErrUnavailable, ErrUnavailable, ErrInvalid", errs)
	}
	if g.State() != bucket.BreakerOpen {
		t.Fatalf("breaker %v after a batch that failed whole, want open", g.State())
	}
	errs = g.ReconcileBatch(ctx, batch)
	if !errors.Is(errs[0], bucket.ErrUnavailable) || !errors.Is(errs[2], bucket.ErrInvalid) {
		t.Fatalf("batch while open: %v", errs)
	}
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bucket.ErrorKind
	}{
		{nil, bucket.KindNone},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), bucket.KindTimeout},
		{errRefused, bucket.KindConnection},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), bucket.KindConnection},
		{errors.New("ERR unknown command"), bucket.KindOther},
	} {
		if got := bucket.KindOf(tc.err); got != tc.want {
			t.Errorf("KindOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
