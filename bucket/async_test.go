package bucket_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// fakeStore is a BatchReconciler whose batches block on gate (when set) and
// fail while fail > 0.
type fakeStore struct {
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{} // when set, receives once a batch reaches the gate
	fail    int
	batches []int
	applied []string
}

func (f *fakeStore) Take(context.Context, string, []bucket.Item) (bucket.Decision, error) {
	return bucket.Decision{Allowed: true, DeniedBy: -1}, nil
}

func (f *fakeStore) Void(context.Context, string, []bucket.Item) error { return nil }

func (f *fakeStore) Reconcile(ctx context.Context, id string, d []bucket.Delta) error {
	return f.ReconcileBatch(ctx, []bucket.Reconciliation{{RequestID: id, Deltas: d}})[0]
}

func (f *fakeStore) ReconcileBatch(_ context.Context, batch []bucket.Reconciliation) []error {
	if f.gate != nil {
		select {
		case f.entered <- struct{}{}:
		default:
		}
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]error, len(batch))
	f.batches = append(f.batches, len(batch))
	for i, rc := range batch {
		if f.fail > 0 {
			f.fail--
			errs[i] = errors.New("store down")
			continue
		}
		f.applied = append(f.applied, rc.RequestID)
	}
	return errs
}

var oneDelta = []bucket.Delta{{Key: "k", Limit: bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}, Units: -1}}

// TestAsyncReconcilerDoesNotWait shows Reconcile returning while the store
// is blocked, the queue filling up to its bound (and then refusing, counted),
// what waited being applied in batches, and Close flushing.
func TestAsyncReconcilerDoesNotWait(t *testing.T) {
	ctx := context.Background()
	f := &fakeStore{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	a := bucket.NewAsyncReconciler(f, bucket.AsyncOptions{QueueSize: 100, MaxBatch: 64})

	// The first reconciliation is picked up and blocks the goroutine in the
	// store; 100 more fill the queue; the next is refused.
	if err := a.Reconcile(ctx, "first", oneDelta); err != nil {
		t.Fatal(err)
	}
	<-f.entered
	for i := range 100 {
		if err := a.Reconcile(ctx, string(rune('a'+i%26))+string(rune('0'+i/26)), oneDelta); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	if err := a.Reconcile(ctx, "one too many", oneDelta); !errors.Is(err, bucket.ErrQueueFull) {
		t.Fatalf("reconcile on a full queue: %v, want ErrQueueFull", err)
	}
	// The store stays blocked until close(f.gate) below: had Reconcile
	// waited on it, the calls above would never have returned. (No clock:
	// a wall-clock bound fails on a loaded machine.)
	if err := a.Reconcile(ctx, "bad", []bucket.Delta{{Key: "k"}}); !errors.Is(err, bucket.ErrInvalid) {
		t.Fatalf("an invalid delta: %v, want ErrInvalid at once", err)
	}

	close(f.gate)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if st.Queued != 101 || st.Applied != 101 || st.Dropped != 1 || st.Pending != 0 {
		t.Errorf("stats %+v, want 101 queued and applied, 1 dropped, 0 pending", st)
	}
	if len(f.batches) > 4 {
		t.Errorf("101 reconciliations in %d round trips %v: not batched", len(f.batches), f.batches)
	}
	closedBefore := a.Stats().DroppedBy[bucket.AsyncDropClosed]
	if err := a.Reconcile(ctx, "late", oneDelta); !errors.Is(err, bucket.ErrClosed) {
		t.Errorf("reconcile after Close: %v, want ErrClosed", err)
	}
	if st := a.Stats(); st.DroppedBy[bucket.AsyncDropClosed] != closedBefore+1 {
		t.Errorf("reconcile after Close: stats %+v, want one more drop for closed", st)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestAsyncReconcilerRetries shows failed reconciliations tried again until
// they pass, and given up (reported and counted) after Attempts.
func TestAsyncReconcilerRetries(t *testing.T) {
	ctx := context.Background()
	f := &fakeStore{fail: 3}
	var dropped []string
	a := bucket.NewAsyncReconciler(f, bucket.AsyncOptions{
		Attempts:   3,
		RetryEvery: time.Millisecond,
		OnDrop:     func(rc bucket.Reconciliation, err error) { dropped = append(dropped, rc.RequestID) },
	})
	if err := a.Reconcile(ctx, "r1", oneDelta); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().Pending > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// r1 failed 3 times (its Attempts) and was dropped.
	if st := a.Stats(); st.Dropped != 1 || st.Retried != 2 || st.Applied != 0 || st.DroppedBy[bucket.AsyncDropAttempts] != 1 {
		t.Fatalf("stats %+v, want 2 retries then 1 drop, for its attempts", st)
	}

	f.mu.Lock()
	f.fail = 1
	f.mu.Unlock()
	if err := a.Reconcile(ctx, "r2", oneDelta); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Applied != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v, want r2 applied on its retry", st)
	}
	if len(dropped) != 1 || dropped[0] != "r1" {
		t.Errorf("OnDrop saw %v, want [r1]", dropped)
	}
}

// TestAsyncReconcilerRedis reconciles through the queue into a real
// redis-server: a retried request id applies once, and Close flushes what is
// queued.
func TestAsyncReconcilerRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	a := bucket.NewAsyncReconciler(newRedis(t, bucket.RedisOptions{Client: c}), bucket.AsyncOptions{})
	l := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	if d, err := a.Take(ctx, "", []bucket.Item{{Key: "async:{a}:x", Limit: l, Cost: 50}}); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	for range 3 { // a retried reconcile: applies once
		if err := a.Reconcile(ctx, "req-1", []bucket.Delta{{Key: "async:{a}:x", Limit: l, Units: -20}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := a.Reconcile(ctx, "more-"+string(rune('0'+i)), []bucket.Delta{{Key: "async:{a}:x", Limit: l, Units: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r := newRedis(t, bucket.RedisOptions{Client: c})
	d, err := r.Take(ctx, "", []bucket.Item{{Key: "async:{a}:x", Limit: l}})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Buckets[0].Remaining; got != 60 {
		t.Errorf("remaining %d after 50 taken, 20 refunded once, 10 charged: want 60", got)
	}
}

// TestAsyncReconcilerLinger: a batch that is not full waits for more
// (Linger of an hour: four reconciliations queued one by one go as one
// batch, sent when it is full), Flush and Close send what waits without
// waiting out the hour, and a negative Linger sends each at once.
func TestAsyncReconcilerLinger(t *testing.T) {
	ctx := context.Background()
	f := &fakeStore{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	a := bucket.NewAsyncReconciler(f, bucket.AsyncOptions{MaxBatch: 4, Linger: time.Hour})
	if err := a.Reconcile(ctx, "a", oneDelta); err != nil {
		t.Fatal(err)
	}
	// Not sent alone. (A loaded machine can only delay a send, so this
	// wait cannot fail a correct reconciler; it catches one that does not
	// linger.)
	select {
	case <-f.entered:
		t.Fatal("a batch of one was sent at once, with an hour to wait for more")
	case <-time.After(100 * time.Millisecond):
	}
	for _, id := range []string{"b", "c", "d"} {
		if err := a.Reconcile(ctx, id, oneDelta); err != nil {
			t.Fatal(err)
		}
	}
	<-f.entered // full: sent
	close(f.gate)
	if err := a.Reconcile(ctx, "e", oneDelta); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute) // far below the hour
	defer cancel()
	if err := a.Flush(fctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := a.Reconcile(ctx, "f", oneDelta); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	batches, applied := slices.Clone(f.batches), len(f.applied)
	f.mu.Unlock()
	if !slices.Equal(batches, []int{4, 1, 1}) || applied != 6 {
		t.Errorf("batches %v, %d applied; want [4 1 1] (full, flushed, closed), 6", batches, applied)
	}

	g := &fakeStore{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	b := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{Linger: -1})
	if err := b.Reconcile(ctx, "x", oneDelta); err != nil {
		t.Fatal(err)
	}
	<-g.entered // sent with nothing else queued, no Flush
	close(g.gate)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
