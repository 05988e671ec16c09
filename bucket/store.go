package bucket

import (
	"context"
	"time"
)

// Limit is the shape of one token bucket: it holds at most Capacity units and
// refills at Rate units every Per. Units are whatever the rule counts
// (requests, tokens or micro-USD). The zero value is invalid; Capacity, Rate
// and Per must all be positive.
type Limit struct {
	Capacity int64         // units; the most the bucket holds (the burst)
	Rate     int64         // units added every Per
	Per      time.Duration // refill period for Rate
}

// Item is one bucket a request takes from: the store key that names the
// bucket, its shape, and the cost in the limit's units. A cost of zero takes
// nothing, always passes (even a bucket in debt) and still reports the
// bucket's status.
type Item struct {
	Key   string
	Limit Limit
	Cost  int64 // units, >= 0
}

// Status is one bucket's state as seen by a take, for the caller's headers.
type Status struct {
	// Remaining is the bucket's level in units right after the take (or, on a
	// denial, right after the refill that the check saw), rounded down. It is
	// negative while the bucket is in debt after reconciliation.
	Remaining int64
	// Reset is the time until the bucket is full again at its refill rate,
	// rounded up to the microsecond; zero when full.
	Reset time.Duration
}

// Decision is the outcome of one Store.Take over all of a request's buckets.
// A denial is a Decision, never an error.
type Decision struct {
	// Allowed is true when every bucket could pay and every take was committed.
	Allowed bool
	// DeniedBy is the index in the items slice of the bucket that denied: the
	// first too-large bucket if any, else the first bucket that could not pay.
	// It is -1 when Allowed.
	DeniedBy int
	// TooLarge is set when the denying bucket's cost exceeds its capacity:
	// the request can never pass that limit and waiting cannot help.
	TooLarge bool
	// RetryAfter is the longest wait among the denying buckets until each of
	// them could pay its cost, rounded up to the microsecond (waiting exactly
	// that long suffices); zero when Allowed or TooLarge.
	RetryAfter time.Duration
	// Buckets holds one Status per item, in the items' order.
	Buckets []Status
}

// Delta is a signed correction applied to one bucket by reconciliation:
// actual cost minus reserved cost, in the limit's units. A positive Units
// charges more (the bucket may go into debt), a negative Units refunds (the
// level never rises above Capacity).
type Delta struct {
	Key   string
	Limit Limit
	Units int64
}

// Store holds bucket state and applies takes and deltas atomically.
// Implementations are safe for concurrent use.
type Store interface {
	// Take checks every item's bucket and, only when all of them can pay,
	// commits every cost; otherwise it changes nothing (two-phase, all or
	// none). Items should be ordered narrowest first, and no key may appear
	// twice. err is non-nil only when the store failed or the input is
	// invalid (wrapping ErrInvalid: a Limit that Validate refuses, a negative
	// cost, a repeated key); a denial is reported in Decision.
	Take(ctx context.Context, items []Item) (Decision, error)
	// Reconcile applies deltas once per requestID: a second call with the
	// same requestID (a retry) is a no-op. A key may appear more than once;
	// its deltas apply in order. err is non-nil only when the store failed or
	// a delta's Limit is invalid (wrapping ErrInvalid); a call that fails
	// does not use up its requestID.
	Reconcile(ctx context.Context, requestID string, deltas []Delta) error
}
