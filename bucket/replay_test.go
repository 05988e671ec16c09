package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// waitFor polls cond until it holds, failing t after a bounded wait.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReplayAfterOutage shows an AsyncReconciler over a Guarded store
// holding every reconciliation while the store is down, far beyond
// Attempts tries, and replaying each once when it is back: every delta is
// applied exactly once, nothing is dropped.
func TestReplayAfterOutage(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 2, OpenFor: 20 * time.Millisecond, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	a := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{Attempts: 2, RetryEvery: 2 * time.Millisecond, MaxBatch: 16})
	defer a.Close()

	const n = 50
	f.down.Store(true)
	for i := range n {
		delta := []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}}
		if err := a.Reconcile(ctx, fmt.Sprintf("r%d", i), delta); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	waitFor(t, 5*time.Second, "all held", func() bool { return a.Stats().Held == n })
	// Many retries (each far more than Attempts per reconciliation), and
	// the breaker has half-opened and failed its probe at least once.
	waitFor(t, 5*time.Second, "retried 10 times over", func() bool {
		return a.Stats().Retried >= 10*n && g.Stats().Calls[bucket.OpReconcile][bucket.ResultFailed] >= 3
	})
	if s := a.Stats(); s.Applied != 0 || s.Dropped != 0 || s.Pending != n {
		t.Fatalf("during the outage: %+v; want nothing applied or dropped", s)
	}

	f.down.Store(false)
	waitFor(t, 5*time.Second, "all applied", func() bool { return a.Stats().Applied == n })
	if s := a.Stats(); s.Dropped != 0 || s.Pending != 0 || s.Held != 0 {
		t.Errorf("after recovery: %+v; want nothing dropped, pending or held", s)
	}
	if st := g.State(); st != bucket.BreakerClosed {
		t.Errorf("breaker %v after the replay, want closed", st)
	}
	applied := f.appliedCounts()
	for i := range n {
		if id := fmt.Sprintf("r%d", i); applied[id] != 1 {
			t.Errorf("%s applied %d times, want once", id, applied[id])
		}
	}
	// The bucket holds the sum of the deltas once: 100 - 50.
	d, err := f.mem.Take(ctx, "", item("k", 0))
	if err != nil || d.Buckets[0].Remaining != guardLimit.Capacity-n {
		t.Errorf("bucket after the replay: %+v, %v; want %d remaining", d, err, guardLimit.Capacity-n)
	}
}

// TestReplayBound shows the hold bounded by QueueSize: past it the
// reconciliations are dropped, each counted once and reported to OnDrop
// (or refused to the caller, also counted), and what was held is applied
// once the store is back.
func TestReplayBound(t *testing.T) {
	ctx := context.Background()
	f := newFlaky(t)
	g := bucket.NewGuarded(f, bucket.GuardOptions{MinCalls: 1, OpenFor: 10 * time.Millisecond, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	var (
		mu      sync.Mutex
		onDrop  = map[string]error{}
		refused int
	)
	const size, n = 10, 40
	a := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{QueueSize: size, RetryEvery: time.Millisecond,
		OnDrop: func(rc bucket.Reconciliation, err error) {
			mu.Lock()
			defer mu.Unlock()
			onDrop[rc.RequestID] = err
		}})
	defer a.Close()

	f.down.Store(true)
	for i := range n {
		delta := []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}}
		if err := a.Reconcile(ctx, fmt.Sprintf("r%d", i), delta); errors.Is(err, bucket.ErrQueueFull) {
			refused++
		} else if err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	waitFor(t, 5*time.Second, "the queue drained into the hold", func() bool {
		s := a.Stats()
		return s.Pending == s.Held
	})
	s := a.Stats()
	mu.Lock()
	dropped := len(onDrop)
	for id, err := range onDrop {
		if !errors.Is(err, bucket.ErrUnavailable) {
			t.Errorf("%s dropped with %v, want ErrUnavailable", id, err)
		}
	}
	mu.Unlock()
	if s.Held != size || s.Dropped != n-size || uint64(dropped+refused) != s.Dropped || s.DroppedBy[bucket.AsyncDropFull] != s.Dropped {
		t.Fatalf("stats %+v, %d reported to OnDrop, %d refused; want %d held, %d dropped, each once",
			s, dropped, refused, size, n-size)
	}

	// Recovery: a replay is the probe that closes the breaker, and what
	// was held lands, once; what was dropped never does.
	f.down.Store(false)
	waitFor(t, 5*time.Second, "the held ones applied", func() bool { return a.Stats().Applied == size })
	applied := f.appliedCounts()
	mu.Lock()
	defer mu.Unlock()
	for id, times := range applied {
		if _, gone := onDrop[id]; gone || times != 1 {
			t.Errorf("%s applied %d times (dropped: %v)", id, times, gone)
		}
	}
	if len(applied) != size {
		t.Errorf("%d reconciliations applied, want %d", len(applied), size)
	}
}

// A reconciliation held longer than MaxHold is dropped, not replayed: the
// store may have applied it already and forgotten its request id since.
func TestAsyncReconcilerMaxHold(t *testing.T) {
	inner := bucket.NewMemory(bucket.MemoryOptions{})
	defer inner.Close()
	down := &outage{Store: inner}
	down.down.Store(true)
	var dropped atomic.Int64
	a := bucket.NewAsyncReconciler(down, bucket.AsyncOptions{RetryEvery: 5 * time.Millisecond, MaxHold: 30 * time.Millisecond,
		OnDrop: func(bucket.Reconciliation, error) { dropped.Add(1) }})
	defer a.Close()
	l := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	if err := a.Reconcile(context.Background(), "r1", []bucket.Delta{{Key: "k", Limit: l, Units: 10}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for dropped.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	down.down.Store(false)
	if dropped.Load() != 1 || a.Stats().Applied != 0 || a.Stats().DroppedBy[bucket.AsyncDropExpired] != 1 {
		t.Fatalf("dropped %d, applied %d, stats %+v: a reconciliation held past MaxHold must be dropped, counted as expired", dropped.Load(), a.Stats().Applied, a.Stats())
	}
}

// outage is a Store whose Reconcile fails with ErrUnavailable while down.
type outage struct {
	bucket.Store
	down atomic.Bool
}

func (o *outage) Reconcile(ctx context.Context, id string, d []bucket.Delta) error {
	if o.down.Load() {
		return fmt.Errorf("test outage: %w", bucket.ErrUnavailable)
	}
	return o.Store.Reconcile(ctx, id, d)
}
