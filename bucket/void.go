package bucket

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrVoided is wrapped by the error of a Take whose request id was voided
// before the take ran (Store.Void came first, a tombstone): the take changed
// nothing. It is the store's answer, not a failure. Test with errors.Is.
var ErrVoided = errors.New("take voided")

// ErrNotSent is wrapped by the errors of calls that never reached the store,
// such as those a Guarded store's open breaker rejects: such a call cannot
// have been applied (see MayHaveApplied).
var ErrNotSent = errors.New("not sent to the store")

// DefaultVoidWindow is how long a store remembers a take's request id for
// Void, and a Void's tombstone for a late take, unless configured otherwise
// (RedisOptions.VoidFor, MemoryOptions.VoidFor; store.void_window). It must
// cover the time from a take that failed on the client's side to its Void
// reaching the store (the AsyncReconciler sends it at once, and holds it
// through an outage), and the time a take may wait inside a stalled store
// before it runs. In Redis every committed take with a request id costs one
// marker key per slot group for that long (about 100 bytes, see the README).
const DefaultVoidWindow = 10 * time.Second

// MayHaveApplied reports whether a Take that returned err may nevertheless
// have been applied by the store, so that it must be voided (Store.Void) to
// give its reservation back: any failure except a caller's mistake
// (ErrInvalid), a take voided before it ran (ErrVoided), and calls that
// cannot have reached the store (ErrNotSent: a breaker rejection; a refused
// connection; no free connection in the pool). False for nil.
func MayHaveApplied(err error) bool {
	switch {
	case err == nil, errors.Is(err, ErrInvalid), errors.Is(err, ErrVoided), errors.Is(err, ErrNotSent),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, redis.ErrPoolTimeout):
		return false
	}
	return true
}

// The take marker of a request id records what happened to its take, so
// that a Void gives back exactly what was taken, once, whatever the order in
// which the take and the Void reach the store. Memory keeps one per request
// id; the Redis scripts keep one string key per slot group, holding 't' or
// 'v' (lua/core.lua mirrors takeMarked and voidMark under the same names).
type mark uint8

const (
	// markNone: no take of the id was applied, and no Void came.
	markNone mark = iota
	// markTaken: a take applied its costs ('t').
	markTaken
	// markVoided: the take was voided ('v'): refunded if it had been
	// applied, otherwise a tombstone that makes a later take apply nothing.
	markVoided
)

// takeMarked is what a take does with its request id's marker: it applies
// nothing when the id was voided (voided true); otherwise it runs as usual,
// and a committed take sets the marker to markTaken.
func takeMarked(m mark) (voided bool) {
	return m == markVoided
}

// voidMark is what a Void does with the marker: refund the take's costs
// when it was applied, and leave the marker voided in every case, so that a
// second Void refunds nothing and a late take applies nothing.
func voidMark(m mark) (next mark, refund bool) {
	return markVoided, m == markTaken
}

// refunds returns the deltas that give back items' costs.
func refunds(items []Item) []Delta {
	deltas := make([]Delta, len(items))
	for i, it := range items {
		deltas[i] = Delta{Key: it.Key, Limit: it.Limit, Units: -it.Cost}
	}
	return deltas
}

// takenBy returns the items whose costs deltas (made by refunds) give back.
func takenBy(deltas []Delta) []Item {
	items := make([]Item, len(deltas))
	for i, d := range deltas {
		items[i] = Item{Key: d.Key, Limit: d.Limit, Cost: -d.Units}
	}
	return items
}

// validateVoid checks a Void's input: a request id, and items as a Take's
// (valid limits, costs >= 0; a repeated key is refused too).
func validateVoid(requestID string, items []Item) error {
	if requestID == "" {
		return &StoreError{Op: "void", Err: fmt.Errorf("no request id: %w", ErrInvalid)}
	}
	if err := validateItems(items); err != nil {
		return &StoreError{Op: "void", Subject: requestID, Err: err}
	}
	return nil
}
