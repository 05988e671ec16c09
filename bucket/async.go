package bucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reconciliation is one Reconcile call held for later: a request id and its
// deltas; or, with Void set, one Void call.
type Reconciliation struct {
	RequestID string
	Deltas    []Delta
	// Void makes this the Void of RequestID's take: Deltas are the take's
	// items with Units = -Cost (as refunds builds them), applied only when
	// that take was, once. RequestID must not be empty.
	Void bool
}

// validate checks rc as Reconcile (or Void) would; the error wraps
// ErrInvalid.
func (rc Reconciliation) validate() error {
	if rc.Void {
		return validateVoid(rc.RequestID, takenBy(rc.Deltas))
	}
	return validateDeltas(rc.RequestID, rc.Deltas)
}

// BatchReconciler is a Store that can apply many reconciliations in one
// round trip. Redis implements it; AsyncReconciler uses it when its store
// does.
type BatchReconciler interface {
	// ReconcileBatch applies each element of batch as Reconcile (or Void,
	// for an element with Void set) would and returns one error per
	// element, nil when it was applied or was a repeated request id.
	ReconcileBatch(ctx context.Context, batch []Reconciliation) []error
}

// DefaultLinger is AsyncOptions.Linger's default: long enough that a node
// serving 1,000 requests a second sends about 5 reconciliations a batch,
// short beside an LLM call (the reservation stands that much longer).
const DefaultLinger = 5 * time.Millisecond

var (
	// ErrQueueFull is wrapped by AsyncReconciler.Reconcile when its queue is
	// full: the deltas were dropped (and counted).
	ErrQueueFull = errors.New("reconcile queue full")
	// ErrClosed is wrapped by AsyncReconciler.Reconcile and Flush after
	// Close.
	ErrClosed = errors.New("reconciler closed")
)

// AsyncDrop says why an AsyncReconciler dropped a reconciliation without
// the store applying it. The names follow ChargeDrop's where they mean the
// same.
type AsyncDrop uint8

const (
	// AsyncDropFull: the queue (Reconcile refused it, ErrQueueFull) or the
	// hold of failures to retry (QueueSize held already) was full.
	AsyncDropFull AsyncDrop = iota
	// AsyncDropClosed: Reconcile was called after Close (ErrClosed), or
	// the last try at Close failed.
	AsyncDropClosed
	// AsyncDropExpired: held through an outage for MaxHold (its age on the
	// monotonic clock, which a stepped wall clock does not move), then
	// tried Attempts times more in vain.
	AsyncDropExpired
	// AsyncDropRefused: the store refused it as invalid (ErrInvalid),
	// which a retry would not heal.
	AsyncDropRefused
	// AsyncDropAttempts: the store failed it Attempts times (not with
	// ErrUnavailable, which holds it instead).
	AsyncDropAttempts
	numAsyncDrops
)

// String returns "full", "closed", "expired", "refused" or "attempts".
func (d AsyncDrop) String() string {
	return [...]string{"full", "closed", "expired", "refused", "attempts"}[d]
}

// AsyncDrops lists every AsyncDrop, for metrics that make each label at
// start.
var AsyncDrops = [...]AsyncDrop{AsyncDropFull, AsyncDropClosed, AsyncDropExpired, AsyncDropRefused, AsyncDropAttempts}

// AsyncOptions configures NewAsyncReconciler. The zero value is a usable
// default.
type AsyncOptions struct {
	// QueueSize bounds the reconciliations waiting to be applied, and
	// separately those held for a retry (after a failure, or while the
	// store is unavailable); 0 means 8192. A failure past the second bound
	// is dropped (counted, and reported to OnDrop).
	QueueSize int
	// MaxBatch bounds the reconciliations applied in one round trip; 0
	// means 256.
	MaxBatch int
	// Linger is how long a batch that is not full waits for more
	// reconciliations before it is sent; 0 means DefaultLinger, a negative
	// value sends at once what is waiting. A longer wait makes larger
	// batches under light load (one script per slot applies a whole batch,
	// and Redis reads and writes a bucket many requests touched once), and
	// delays each reconciliation by at most as long; Flush and Close do not
	// wait.
	Linger time.Duration
	// Timeout bounds one round trip to the store; 0 means one second.
	Timeout time.Duration
	// Attempts is how many times a reconciliation is tried before it is
	// dropped; 0 means 5. A repeated attempt is safe: the store applies a
	// request id once. A try that fails with ErrUnavailable (a Guarded
	// store that is down or whose breaker is open) does not count: the
	// reconciliation is held, within QueueSize, and replayed once the
	// store is back, however long the outage.
	Attempts int
	// RetryEvery is the wait before failed reconciliations are tried again;
	// 0 means 100ms.
	RetryEvery time.Duration
	// MaxHold bounds how long a reconciliation is held through an outage;
	// past it, it is dropped (counted, and reported to OnDrop). Set it below
	// the store's once-per-request-id window (RedisOptions.DedupFor): an
	// attempt whose reply was lost may have been applied, and a replay after
	// the store forgot the request id would apply it twice. 0: no bound.
	MaxHold time.Duration
	// OnDrop, when set, is called with every reconciliation given up after
	// Attempts tries, or at Close, and the last error, from the flushing
	// goroutine. Refusals by Reconcile (queue full, closed) are returned to
	// the caller instead. Every drop is counted in Stats.
	OnDrop func(rc Reconciliation, err error)
}

// AsyncStats counts what an AsyncReconciler did since it was created. Voids
// are reconciliations too, in every count.
type AsyncStats struct {
	Queued  uint64 // reconciliations accepted by Reconcile or Void, and voids of failed takes
	Voids   uint64 // of Queued, voids of takes that failed but may have been applied
	Applied uint64 // reconciliations the store applied (or found already applied)
	Retried uint64 // failed attempts that were queued for a retry
	Dropped uint64 // reconciliations refused (queue full, closed) or given up
	// DroppedBy splits Dropped by reason, e.g. DroppedBy[AsyncDropExpired].
	DroppedBy [numAsyncDrops]uint64
	Pending   int64 // reconciliations accepted and not yet applied or dropped
	Held      int64 // of Pending, those held for a retry (at most QueueSize)
}

// AsyncReconciler is a Store that takes synchronously and reconciles in the
// background, so that reconciliation adds no latency to a request: Reconcile
// validates, copies the deltas into a bounded queue and returns at once; one
// goroutine applies what is queued in batches (one pipelined round trip per
// batch when the store is a BatchReconciler, such as Redis), retrying
// failures. Over a Guarded store it holds what fails with ErrUnavailable
// (within QueueSize) and replays it every RetryEvery, each replay going
// through the breaker (so one of them is the probe that closes it), until
// the store is back. It is safe for concurrent use. Create one with
// NewAsyncReconciler; Close flushes the queue and stops the goroutine.
//
// A Take that fails in a way that may have been applied (MayHaveApplied:
// a timeout, a broken connection) is voided: the AsyncReconciler queues the
// Void of its request id and items, which it applies as it applies
// reconciliations (and holds through an outage), so that the reservation
// the store may have taken comes back, once.
//
// A Take may not yet see a Reconcile made just before it: reconciliation is
// eventually applied, within one round trip under normal load. Call Flush to
// wait for it.
type AsyncReconciler struct {
	store   Store
	batcher BatchReconciler // store, when it batches
	o       AsyncOptions

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
	queue  chan queued
	done   chan struct{}
	once   sync.Once
	drops  error // set by the goroutine before done closes: the Close error

	queuedN, voids, applied, retried, dropped atomic.Uint64
	droppedBy                                 [numAsyncDrops]atomic.Uint64
	pending, held                             atomic.Int64
}

// drop counts one reconciliation dropped for why.
func (a *AsyncReconciler) drop(why AsyncDrop) {
	a.dropped.Add(1)
	a.droppedBy[why].Add(1)
}

var _ Store = (*AsyncReconciler)(nil)

// queued is one reconciliation in the queue, or a Flush waiting for all
// before it (flushed set).
type queued struct {
	rc       Reconciliation
	at       time.Time // when Reconcile accepted it
	attempts int
	flushed  chan struct{}
}

// NewAsyncReconciler returns an AsyncReconciler over store configured by o,
// and starts its goroutine.
func NewAsyncReconciler(store Store, o AsyncOptions) *AsyncReconciler {
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 100 * time.Millisecond
	}
	a := &AsyncReconciler{
		store: store,
		o:     o,
		queue: make(chan queued, o.QueueSize),
		done:  make(chan struct{}),
	}
	a.batcher, _ = store.(BatchReconciler)
	go a.loop()
	return a
}

// Take implements Store by calling the wrapped store's Take. When that
// fails and may have been applied (MayHaveApplied), and requestID is not
// empty, it also queues the Void of requestID's take of items (a queue
// full or closed drops it, counted); the Take's own result is returned as
// is. For a *PartialError only the failed items are voided: the served
// ones are the caller's to settle or give back.
func (a *AsyncReconciler) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	d, err := a.store.Take(ctx, requestID, items)
	if requestID != "" && MayHaveApplied(err) {
		if pe := AsPartial(err); pe != nil {
			items = pe.failedItems(items) // the served items are held: the caller's
		}
		if validateVoid(requestID, items) == nil && costs(items) {
			if a.enqueue(Reconciliation{RequestID: requestID, Deltas: refunds(items), Void: true}) == nil {
				a.voids.Add(1)
			}
		}
	}
	return d, err
}

// costs reports whether any item costs something: a take of nothing needs
// no Void.
func costs(items []Item) bool {
	for _, it := range items {
		if it.Cost != 0 {
			return true
		}
	}
	return false
}

// Reconcile implements Store without waiting for the store: it checks the
// deltas (an invalid limit returns an error wrapping ErrInvalid, and nothing
// is queued), copies them and queues them. When the queue is full it drops
// them and returns an error wrapping ErrQueueFull; after Close, one wrapping
// ErrClosed. ctx is not used: the store call has its own Timeout.
func (a *AsyncReconciler) Reconcile(_ context.Context, requestID string, deltas []Delta) error {
	if err := validateDeltas(requestID, deltas); err != nil {
		return err
	}
	if len(deltas) == 0 {
		return nil
	}
	return a.enqueue(Reconciliation{RequestID: requestID, Deltas: slices.Clone(deltas)})
}

// Void implements Store without waiting for the store, as Reconcile: it
// checks requestID and items (an error wraps ErrInvalid), and queues the
// Void; the errors are Reconcile's.
func (a *AsyncReconciler) Void(_ context.Context, requestID string, items []Item) error {
	if err := validateVoid(requestID, items); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	return a.enqueue(Reconciliation{RequestID: requestID, Deltas: refunds(items), Void: true})
}

// enqueue queues rc, or drops it (counted) when the queue is full or
// closed.
func (a *AsyncReconciler) enqueue(rc Reconciliation) error {
	op := "reconcile"
	if rc.Void {
		op = "void"
	}
	q := queued{rc: rc, at: time.Now()}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.drop(AsyncDropClosed)
		return &StoreError{Op: op, Subject: rc.RequestID, Err: ErrClosed}
	}
	select {
	case a.queue <- q:
		a.queuedN.Add(1)
		a.pending.Add(1)
		return nil
	default:
		a.drop(AsyncDropFull)
		return &StoreError{Op: op, Subject: rc.RequestID, Err: ErrQueueFull}
	}
}

// Flush waits until every reconciliation queued before the call has been
// tried once (a failed one may wait for a retry). The error wraps ctx's, or
// ErrClosed after Close.
func (a *AsyncReconciler) Flush(ctx context.Context) error {
	flushed := make(chan struct{})
	a.mu.RLock()
	if a.closed {
		a.mu.RUnlock()
		return &StoreError{Op: "flush", Err: ErrClosed}
	}
	select {
	case a.queue <- queued{flushed: flushed}:
	case <-ctx.Done():
		a.mu.RUnlock()
		return &StoreError{Op: "flush", Err: ctx.Err()}
	}
	a.mu.RUnlock()
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return &StoreError{Op: "flush", Err: ctx.Err()}
	}
}

// Close stops accepting reconciliations, applies every one queued (those
// awaiting a retry get one last try), and stops the goroutine. It returns an
// error when some were dropped at the end. It is idempotent: later calls
// return the same error.
func (a *AsyncReconciler) Close() error {
	a.once.Do(func() {
		a.mu.Lock()
		a.closed = true
		close(a.queue)
		a.mu.Unlock()
	})
	<-a.done
	return a.drops
}

// Stats returns the counters. Safe to call at any time.
func (a *AsyncReconciler) Stats() AsyncStats {
	s := AsyncStats{
		Queued:  a.queuedN.Load(),
		Voids:   a.voids.Load(),
		Applied: a.applied.Load(),
		Retried: a.retried.Load(),
		Dropped: a.dropped.Load(),
		Pending: a.pending.Load(),
		Held:    a.held.Load(),
	}
	for i := range a.droppedBy {
		s.DroppedBy[i] = a.droppedBy[i].Load()
	}
	return s
}

func (a *AsyncReconciler) loop() {
	defer close(a.done)
	var (
		batch  = make([]queued, 0, a.o.MaxBatch)
		retry  []queued
		timer  = time.NewTimer(time.Hour)
		timerC <-chan time.Time
		linger = time.NewTimer(time.Hour)
	)
	timer.Stop()
	linger.Stop()
	for {
		select {
		case q, ok := <-a.queue:
			if !ok {
				a.finish(retry)
				return
			}
			var closed bool
			batch, closed = a.collect(append(batch[:0], q), linger)
			var flushed chan struct{}
			if last := batch[len(batch)-1]; last.flushed != nil {
				flushed, batch = last.flushed, batch[:len(batch)-1]
			}
			retry = a.apply(batch, retry, false)
			if flushed != nil {
				close(flushed)
			}
			if closed {
				a.finish(retry)
				return
			}
		case <-timerC:
			timerC = nil
			due := retry
			retry = nil
			for len(due) > 0 {
				n := min(len(due), a.o.MaxBatch)
				retry = a.apply(due[:n], retry, false)
				due = due[n:]
			}
		}
		a.held.Store(int64(len(retry)))
		if len(retry) > 0 && timerC == nil {
			timer.Reset(a.o.RetryEvery)
			timerC = timer.C
		}
	}
}

// collect adds to batch (which holds one reconciliation) what is waiting,
// then, while the batch is not full, what comes within Linger, up to
// MaxBatch; a Flush ends the batch at once (it is then its last element).
// closed reports that the queue was closed meanwhile.
func (a *AsyncReconciler) collect(batch []queued, linger *time.Timer) (_ []queued, closed bool) {
	for batch[len(batch)-1].flushed == nil && len(batch) < a.o.MaxBatch {
		select {
		case q, ok := <-a.queue:
			if !ok {
				return batch, true
			}
			batch = append(batch, q)
			continue
		default:
		}
		break
	}
	if a.o.Linger < 0 || batch[len(batch)-1].flushed != nil || len(batch) >= a.o.MaxBatch {
		return batch, false
	}
	linger.Reset(a.o.Linger)
	defer linger.Stop()
	for batch[len(batch)-1].flushed == nil && len(batch) < a.o.MaxBatch {
		select {
		case q, ok := <-a.queue:
			if !ok {
				return batch, true
			}
			batch = append(batch, q)
		case <-linger.C:
			return batch, false
		}
	}
	return batch, false
}

// finish runs at Close, once the queue is drained: a last try for the
// retries, and the count of what is dropped.
func (a *AsyncReconciler) finish(retry []queued) {
	before := a.dropped.Load()
	for len(retry) > 0 {
		n := min(len(retry), a.o.MaxBatch)
		a.apply(retry[:n], nil, true)
		retry = retry[n:]
	}
	a.held.Store(0)
	if n := a.dropped.Load() - before; n > 0 {
		a.drops = &StoreError{Op: "close", Err: fmt.Errorf("%d reconciliations dropped", n)}
	}
}

// apply sends batch to the store, and appends to retry the failures that may
// be tried again (none when last).
func (a *AsyncReconciler) apply(batch, retry []queued, last bool) []queued {
	if len(batch) == 0 {
		return retry
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.o.Timeout)
	defer cancel()
	errs := make([]error, len(batch))
	if a.batcher != nil {
		rcs := make([]Reconciliation, len(batch))
		for i, q := range batch {
			rcs[i] = q.rc
		}
		copy(errs, a.batcher.ReconcileBatch(ctx, rcs))
	} else {
		for i, q := range batch {
			if q.rc.Void {
				errs[i] = a.store.Void(ctx, q.rc.RequestID, takenBy(q.rc.Deltas))
			} else {
				errs[i] = a.store.Reconcile(ctx, q.rc.RequestID, q.rc.Deltas)
			}
		}
	}
	for i, q := range batch {
		err := errs[i]
		switch {
		case err == nil:
			a.applied.Add(1)
			a.pending.Add(-1)
		case !last && errors.Is(err, ErrUnavailable) && len(retry) < a.o.QueueSize && !a.expired(q):
			// The store is down: hold it, without using up an attempt.
			retry = append(retry, q)
			a.retried.Add(1)
		case !last && !errors.Is(err, ErrInvalid) && q.attempts+1 < a.o.Attempts && len(retry) < a.o.QueueSize:
			q.attempts++
			retry = append(retry, q)
			a.retried.Add(1)
		default:
			a.drop(a.dropReason(q, err, last, len(retry)))
			a.pending.Add(-1)
			if a.o.OnDrop != nil {
				a.o.OnDrop(q.rc, err)
			}
		}
	}
	return retry
}

// expired reports whether q was held longer than MaxHold, its age read on
// the monotonic clock (q.at is time.Now's: a wall clock stepped forward or
// back neither ages nor rejuvenates it).
func (a *AsyncReconciler) expired(q queued) bool {
	return a.o.MaxHold > 0 && time.Since(q.at) >= a.o.MaxHold
}

// dropReason is why apply gives up q after its try failed with err: at
// Close's last try, closed; then refused, full (the hold of retries is at
// QueueSize), expired (held past MaxHold) or attempts.
func (a *AsyncReconciler) dropReason(q queued, err error, last bool, held int) AsyncDrop {
	switch {
	case last:
		return AsyncDropClosed
	case errors.Is(err, ErrInvalid):
		return AsyncDropRefused
	case held >= a.o.QueueSize:
		return AsyncDropFull
	case errors.Is(err, ErrUnavailable) && a.expired(q):
		return AsyncDropExpired
	}
	return AsyncDropAttempts
}
