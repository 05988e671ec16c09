package bucket

import (
	"context"
	"errors"
	"strconv"
)

// A take over the slot groups of a Redis Cluster whose keys live on several
// masters can fail on one master while the others serve theirs. By default
// such a take fails whole: the groups that took are refunded and the caller
// sees one error, as when the whole store is down. A caller that judges
// each of its limits on its own (meter: each rule fails open or closed as
// configured) asks with WithPartial to be given the served part instead:
// the take then goes on past a group that fails, and returns, with the
// Decision over the groups served, a *PartialError naming the items whose
// group failed.

// partialKey marks a context whose caller takes partial takes (WithPartial).
type partialKey struct{}

// WithPartial returns ctx marked so that a Take made with it over the slot
// groups of a Redis Cluster (Redis, Guarded, AsyncReconciler, DenyCache,
// Leased: a leased item whose lease covers its cost is served from it; one
// whose refill failed is Failed, its lease kept) may be served in part:
// when some groups fail (a
// master down or timing out, or, in a Guarded store with
// GuardOptions.MasterOf, a master whose breaker is not closed) and at
// least one other was served, the take returns the Decision over the
// served items with a *PartialError (see it for what the caller then
// holds and must give back). Without the mark such a take fails whole, as
// before. A store with one part (Memory, a single Redis) never returns a
// PartialError. Allocates; make the context once and reuse it.
func WithPartial(ctx context.Context) context.Context {
	return context.WithValue(ctx, partialKey{}, true)
}

// PartialAllowed reports whether ctx carries WithPartial's mark: whether
// a store may answer a take made with it with a *PartialError. For stores
// outside this package that split a take (and tests' fakes of a cluster).
func PartialAllowed(ctx context.Context) bool {
	ok, _ := ctx.Value(partialKey{}).(bool)
	return ok
}

// PartialError is the error of a Take made with WithPartial whose items
// live in several parts of the store (the slot groups of a Redis Cluster,
// on their masters) of which some failed and at least one was served. The
// Decision returned with it covers every item: the served items' statuses,
// and zero Statuses for the Failed ones.
//
//   - Decision.Allowed: every served item's bucket could pay and its take
//     is committed (held under the request id, like any take): the caller
//     settles those items, or gives them back with Store.Void (Reconcile
//     of the negated costs for an empty request id) when it refuses the
//     request after all (a fail-closed limit among the Failed items, or a
//     fallback that denies them).
//   - not Allowed: a served item's bucket denied (DeniedBy names it, never
//     a Failed item); the served groups were refunded, nothing is held.
//
// Either way the Failed items' takes may have been applied (Err decides:
// MayHaveApplied): an AsyncReconciler voids those items, as it voids a
// failed take's. The caller judges the Failed items without the store
// (a fail-open limit by the node's fallback, a fail-closed one refuses).
type PartialError struct {
	// Failed are the indexes, ascending, in the take's items of those
	// whose part failed or was not sent (its breaker open).
	Failed []int
	// Err is the failure of the first part that failed, or, when every
	// failed part was rejected unsent, the rejection (wrapping
	// ErrNotSent): what MayHaveApplied reads.
	Err error
	// causes are the failures of every part that failed (Err the first),
	// each a *StoreError naming a key of its part: a Guarded store counts
	// each against its own master's breaker. Nil: Err alone.
	causes []error
}

// Error reads "bucket: take served in part: <n> of the items failed: <Err>".
func (e *PartialError) Error() string {
	return "bucket: take served in part: " + strconv.Itoa(len(e.Failed)) + " of the items failed: " + errText(e.Err)
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Unwrap returns Err.
func (e *PartialError) Unwrap() error { return e.Err }

// AsPartial returns the *PartialError err holds (errors.As), or nil. A
// nil err costs nothing (errors.As's target would escape: an allocation
// on every take).
func AsPartial(err error) *PartialError {
	if err == nil {
		return nil
	}
	var pe *PartialError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// failedItems returns the items at pe.Failed.
func (pe *PartialError) failedItems(items []Item) []Item {
	out := make([]Item, 0, len(pe.Failed))
	for _, i := range pe.Failed {
		if i >= 0 && i < len(items) {
			out = append(out, items[i])
		}
	}
	return out
}
