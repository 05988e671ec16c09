package bucket

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Limit is the shape of one bucket: a token bucket, a calendar quota, or a
// window counter (Algorithm SlidingWindow or FixedWindow).
//
// A token bucket (WindowStart and WindowEnd zero) holds at most Capacity
// units and refills at Rate units every Per; Capacity, Rate and Per must all
// be positive.
//
// A quota (WindowStart and WindowEnd set, as Quota makes it) admits Capacity
// units within the window [WindowStart, WindowEnd) and starts again from
// nothing used when a take names a later window. The caller computes the
// window of the instant from its period (day, week, month) and time zone, so
// a Store needs no calendar. Rate and Per are ignored; there is no refill and
// no burst within the window.
//
// A window counter (Algorithm set, see window.go) admits Capacity units per
// window of Per, the windows aligned on the Unix epoch on the store's clock
// (Redis TIME: one clock for every proxy node), so the caller computes no
// window. WindowEnd and Rate are unused. WindowStart is zero in a take; in
// a Delta (and a Void's items) it may name the window the take counted in
// (Decision.Windows), which the delta then applies to; zero applies it to the
// store's current window.
//
// Units are whatever the rule counts (requests, tokens or micro-USD). The
// zero value is invalid (see Validate). A Limit is a plain value, safe to
// copy and share.
type Limit struct {
	Capacity int64         // units; the most the bucket holds (the burst), or a quota admits per window
	Rate     int64         // units added every Per; token buckets only
	Per      time.Duration // refill period for Rate; token buckets only

	// WindowStart is the first instant of a quota's window, used at
	// microsecond resolution: it names the window (a take with a later
	// WindowStart begins a new period). Zero for a token bucket.
	WindowStart time.Time
	// WindowEnd is the instant a quota's window ends (exclusive), at
	// microsecond resolution: denials retry after it, statuses reset at
	// it. Zero for a token bucket.
	WindowEnd time.Time

	// Concurrent makes the Limit an in-flight limit (see Slots): at most
	// Capacity request ids hold a slot at once, each until its release or
	// until Per (the slot lease) has passed since its take. Rate and the
	// window are unused (zero).
	Concurrent bool

	// Algorithm is how a limit that is not a quota counts: TokenBucket
	// (the zero value), SlidingWindow or FixedWindow. A quota's is
	// TokenBucket.
	Algorithm Algorithm
}

// Quota returns the Limit of a quota of capacity units within the window
// [windowStart, windowEnd). It does not validate them (see Limit.Validate).
func Quota(capacity int64, windowStart, windowEnd time.Time) Limit {
	return Limit{Capacity: capacity, WindowStart: windowStart, WindowEnd: windowEnd}
}

// Slots returns the Limit of an in-flight limit: at most capacity request
// ids hold a slot at once, each for at most lease after its take (a holder
// that never releases, such as a node that died, is forgotten then). It
// does not validate them (see Limit.Validate).
func Slots(capacity int64, lease time.Duration) Limit {
	return Limit{Capacity: capacity, Per: lease, Concurrent: true}
}

// IsQuota reports whether l is a quota: a token-bucket Algorithm with
// either window bound set (a valid quota sets both).
func (l Limit) IsQuota() bool {
	return l.Algorithm == TokenBucket && (!l.WindowStart.IsZero() || !l.WindowEnd.IsZero())
}

// Item is one bucket a request takes from: the store key that names the
// bucket, its shape, and the cost in the limit's units. A cost of zero takes
// nothing, always passes (even a bucket in debt or a quota used up) and
// still reports the bucket's status. A key holds one kind of bucket: a key
// whose state is of the other kind (a rule that changed from a rate to a
// quota, or back) is taken as new.
type Item struct {
	Key   string
	Limit Limit
	Cost  int64 // units, >= 0
	// Lease, when its Size is set, lets a Leased store serve the item from
	// a lease it holds in memory (see Leased); every other store ignores
	// it. The zero Lease: not leased.
	Lease Lease
}

// Status is one bucket's state as seen by a take, for the caller's headers.
type Status struct {
	// Remaining is the bucket's level in units right after the take (or, on a
	// denial, right after the refill that the check saw), rounded down. It is
	// negative while the bucket is in debt after reconciliation. For a
	// quota: Capacity minus the units used in the window, negative while
	// reconciliation has charged it beyond Capacity.
	Remaining int64
	// Reset is the time until the bucket is full again at its refill rate,
	// rounded up to the microsecond; zero when full. For a quota: the time
	// until its window ends (whatever it holds), zero once the store's clock
	// has passed WindowEnd. A sliding window: the time until nothing it
	// counts weighs any more; a fixed window: until its window ends.
	Reset time.Duration
}

// Decision is the outcome of one Store.Take over all of a request's buckets.
// A denial is a Decision, never an error.
type Decision struct {
	// Allowed is true when every bucket could pay and every take was committed.
	Allowed bool
	// DeniedBy is the index in the items slice of the bucket that denied: the
	// first too-large bucket if any, else the bucket that could not pay
	// whose wait is RetryAfter (the longest; the first of those that wait
	// as long), so that a denial names the limit it waits for. It is -1
	// when Allowed.
	DeniedBy int
	// TooLarge is set when the denying bucket's cost exceeds its capacity:
	// the request can never pass that limit (a quota: in any window) and
	// waiting cannot help.
	TooLarge bool
	// RetryAfter is the longest wait among the denying buckets until each of
	// them could pay its cost, rounded up to the microsecond (waiting exactly
	// that long suffices); zero when Allowed or TooLarge. A denying quota
	// waits until its window ends (zero when the store's clock is already
	// past WindowEnd: the caller's next window is due).
	RetryAfter time.Duration
	// Buckets holds one Status per item, in the items' order.
	Buckets []Status
	// Windows, when any item is a window counter, holds one instant per
	// item, in the items' order: for a window counter, the first instant
	// of the window the take (or, on a denial, the check) counted in, on
	// the store's clock, which a Delta of the take names as its Limit's
	// WindowStart (see Limit); zero for other items. Nil when no item is a
	// window counter, or on a cached denial.
	Windows []time.Time
	// Cached is set on a denial answered from memory by a DenyCache,
	// without the store: only Buckets[DeniedBy] is known (the status the
	// store reported with the denial, its Reset counted down since), and
	// every other Status is zero. RetryAfter is then the rest of the wait
	// the store reported. Never set on an admission.
	Cached bool
}

// Delta is a signed correction applied to one bucket by reconciliation:
// actual cost minus reserved cost, in the limit's units. A positive Units
// charges more (the bucket may go into debt), a negative Units refunds (the
// level never rises above Capacity).
//
// A quota's delta must carry the Limit of its take, window included: it
// changes the units used in that window (a refund never below zero; a
// charge may go beyond Capacity). When the quota has since moved on to a
// later window, the delta applies to nothing: a past period's usage never
// charges or refunds the current one (Redis and Memory count such
// reconciliations: PeriodMoved).
type Delta struct {
	Key   string
	Limit Limit
	Units int64
}

// StatusTaker is a Store whose take can write the Decision's Buckets into
// the caller's slice: TakeInto is Take, with Decision.Buckets being
// statuses[:len(items)] when statuses is that long (a new slice
// otherwise), so that the caller can keep the statuses without an
// allocation per take. Memory implements it; the caller (meter) uses it
// when its store does.
type StatusTaker interface {
	TakeInto(ctx context.Context, requestID string, items []Item, statuses []Status) (Decision, error)
}

// Store holds bucket state and applies takes, deltas and voids atomically.
// Implementations are safe for concurrent use.
//
// A request id names one request's take: the take records it (a marker
// kept for the store's void window, a few seconds) so that Void can later
// give back exactly what that take applied, once. The empty request id
// records nothing and cannot be voided.
type Store interface {
	// Take checks every item's bucket and, only when all of them can pay,
	// commits every cost; otherwise it changes nothing (two-phase, all or
	// none). Items should be ordered narrowest first, and no key may appear
	// twice. A committed take with a requestID is recorded for Void. err is
	// non-nil only when the store failed, the input is invalid (wrapping
	// ErrInvalid: a Limit that Validate refuses, a negative cost, a repeated
	// key), or requestID was voided before the take ran (wrapping ErrVoided:
	// nothing was taken); a denial is reported in Decision. A take that
	// failed may still have been applied (the store got it, the reply was
	// lost or late): see MayHaveApplied and Void.
	Take(ctx context.Context, requestID string, items []Item) (Decision, error)
	// Reconcile applies deltas once per requestID: a second call with the
	// same requestID (a retry) is a no-op. Deltas of zero units change
	// nothing: a store may leave them out, and need not record the
	// requestID of a call with no others. A key may appear more than once;
	// its deltas apply in order. err is non-nil only when the store failed or
	// a delta's Limit is invalid (wrapping ErrInvalid); a call that fails
	// does not use up its requestID.
	Reconcile(ctx context.Context, requestID string, deltas []Delta) error
	// Void cancels the take of requestID, whose items (the same keys,
	// limits and costs) it is given: when that take was applied, its costs
	// are refunded (a token bucket never above capacity; a quota in the
	// take's window only); when it was not (yet), a tombstone makes a later
	// take of requestID apply nothing and fail with ErrVoided. Either way it
	// happens once: a second Void is a no-op. In Redis Cluster each slot
	// group of the take is voided on its own, so a take applied in some
	// groups only is refunded in those. The record lives for the store's
	// void window: a Void that comes later than that after the take, or a
	// take that runs later than that after the Void, is not matched (a
	// bounded leak of one reservation, which refills in time). err is
	// non-nil when the store failed (a retry is safe), or the input is
	// invalid (wrapping ErrInvalid: an empty requestID, an invalid Limit, a
	// negative cost).
	Void(ctx context.Context, requestID string, items []Item) error
}

// StoreError is the error a store call (Take, Reconcile, Void, the
// asynchronous reconciler's Reconcile, Flush and Close) returns when the
// call failed or its input was refused. Its text is "bucket: <Op>
// <Subject, quoted>: <Err>" ("bucket: take \"k\": cost -1 is negative:
// invalid input"), Subject and its space left out when empty ("bucket:
// flush: context deadline exceeded"). Callers branch on the sentinel errors
// it wraps (ErrInvalid, ErrVoided, ErrClosed, ErrQueueFull…) with
// errors.Is, and read its fields with errors.As: [Guarded] does, to name
// the operation and its subject once in its own error. The zero value
// reads "bucket: : <nil>"; a StoreError is not changed after it is
// returned, so it is safe to read from any goroutine.
type StoreError struct {
	// Op is the operation: "take", "reconcile", "void", "flush" or
	// "close" (Guarded's Op names, as Op.String spells them, where they
	// exist).
	Op string
	// Subject is what the operation was about: a Take's first key (or the
	// key that failed), a Reconcile's or Void's request id; "" when none.
	Subject string
	// Err is what went wrong: a sentinel error, or the store's own error
	// (a Redis reply, a dial error, a context's error), possibly wrapped
	// with more detail.
	Err error
	// Key, when set, is a key of the part of the store whose call failed
	// (in a Redis Cluster, a key of the slot whose script failed: a
	// Reconcile's Subject is its request id), so that Guarded counts the
	// failure against that key's master; not in the Error text.
	Key string
}

// Error returns `bucket: <Op> "<Subject>": <Err>`, or `bucket: <Op>: <Err>`
// when Subject is empty.
func (e *StoreError) Error() string { return "bucket: " + e.text() }

// text is Error without the package's "bucket: ": what Guarded quotes of
// the failure that opened its breaker.
func (e *StoreError) text() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Subject != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Subject))
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("<nil>")
	}
	return b.String()
}

// Unwrap returns Err.
func (e *StoreError) Unwrap() error { return e.Err }
