package meter

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// partialTakes is the context of a take that may be served in part
// (bucket.WithPartial): made once, so that a take allocates no context.
var partialTakes = bucket.WithPartial(context.Background())

// takePartial judges a take the store served in part (pe: a Redis Cluster
// master down, or its breaker open, while the masters of the request's
// other buckets answered), rule by rule, as the README's "When Redis
// fails" states:
//
//   - the served buckets denied (d not Allowed): the request is denied by
//     them, as by any take; nothing is held anywhere.
//   - a rule of a failed bucket fails closed: the request is refused
//     (FailClosed) and the served buckets are given back (a refusal spends
//     nothing).
//   - every failed rule fails open: their buckets are taken from the
//     node's fallback (Applied.Fallback); a denial there gives the served
//     buckets back and denies the request, an admission keeps both takes,
//     each settled where it was taken (settle.go).
//
// The failure decisions are counted for the failed rules only. It returns
// the Decision over every item to go on with, or done when it set a
// verdict that ends the take (FailClosed; admitted without limits when
// there is no fallback or it failed, as a whole failure is).
func (x *Exchange) takePartial(items []bucket.Item, d bucket.Decision, pe *bucket.PartialError, held heldTake) (_ bucket.Decision, done bool) {
	if !d.Allowed {
		return x.dropFailed(d, pe.Failed), false
	}
	m, id := x.m, x.req.ID
	failed := make([]Applied, 0, len(pe.Failed))
	for _, i := range pe.Failed {
		failed = append(failed, x.rules[i])
	}
	if closed := failClosedRule(failed); closed != nil {
		x.giveBack(items, d, pe.Failed, held)
		m.opt.Metrics.failure(failed, OutcomeFailClosed)
		x.verdict, x.closedBy = FailClosed, closed
		return d, true
	}
	m.opt.Metrics.failure(failed, OutcomeFailOpen)
	if m.opt.Fallback == nil {
		x.giveBack(items, d, pe.Failed, held)
		m.log.Warn("store unavailable for part of the request; admitting without limits", "err", pe, "request_id", id)
		x.rules, x.unlimited = nil, true
		return d, true
	}
	fitems := make([]bucket.Item, len(pe.Failed))
	for j, i := range pe.Failed {
		fitems[j] = items[i]
	}
	fd, err := m.opt.Fallback.Take(context.Background(), id, fitems) // in memory: no deadline to miss
	if err != nil {
		x.giveBack(items, d, pe.Failed, held)
		m.log.Error("fallback take failed; admitting without limits", "err", err, "request_id", id)
		x.rules, x.unlimited = nil, true
		return d, true
	}
	x.fallback = true
	for j, i := range pe.Failed {
		x.rules[i].Fallback = true
		if j < len(fd.Buckets) {
			d.Buckets[i] = fd.Buckets[j]
		}
		if fd.Windows != nil {
			if d.Windows == nil {
				d.Windows = make([]time.Time, len(items))
			}
			d.Windows[i] = fd.Windows[j]
		}
	}
	if !fd.Allowed {
		// The fallback denied a failed rule: the served buckets' take is
		// given back (its windows read before d names the denial).
		x.giveBack(items, d, pe.Failed, held)
		d.Allowed, d.TooLarge, d.RetryAfter = false, fd.TooLarge, fd.RetryAfter
		d.DeniedBy = pe.Failed[fd.DeniedBy]
	}
	return d, false
}

// dropFailed removes the rules at failed (ascending indexes) from x.rules,
// and their statuses and windows from d, for a request the served part of
// the store denied: it was judged by the served rules alone (as a cached
// denial is by its denying rule), and a failed rule's zero status would
// read as a bucket with nothing left in the answer's limit headers.
// d.DeniedBy, a served rule's, is moved with it.
func (x *Exchange) dropFailed(d bucket.Decision, failed []int) bucket.Decision {
	keep, denied := 0, d.DeniedBy
	for i := range x.rules {
		if slices.Contains(failed, i) {
			if i < d.DeniedBy {
				denied--
			}
			continue
		}
		x.rules[keep], d.Buckets[keep] = x.rules[i], d.Buckets[i]
		if d.Windows != nil {
			d.Windows[keep] = d.Windows[i]
		}
		keep++
	}
	x.rules, d.Buckets, d.DeniedBy = x.rules[:keep], d.Buckets[:keep], denied
	if d.Windows != nil {
		d.Windows = d.Windows[:keep]
	}
	return d
}

// heldTake is what a take holds in the store, for giveBack: the request
// id it took under and, for a take of sharded rules
// (bucket.ShardedDecision), the buckets each rule took from (nil: items).
type heldTake struct {
	id    string
	taken [][]bucket.Item
}

// giveBack gives the store back what its take of items, decided by d,
// took from the buckets not at failed (the served part of a take served
// in part), held as h says: Store.Void of h.id, Reconcile of the negated
// costs for an empty one and for a leased bucket. A failure is logged: the units then come back
// as the buckets refill (a Void held by the AsyncReconciler is replayed).
func (x *Exchange) giveBack(items []bucket.Item, d bucket.Decision, failed []int, h heldTake) {
	served := make([]bucket.Item, 0, len(items))
	for i, it := range items {
		if slices.Contains(failed, i) {
			continue
		}
		if h.taken != nil && i < len(h.taken) && (len(h.taken[i]) != 1 || h.taken[i][0].Key != it.Key) {
			for _, t := range h.taken[i] { // a sharded rule's shards
				if t.Cost != 0 {
					served = append(served, t)
				}
			}
			continue
		}
		if it.Cost == 0 {
			continue
		}
		if d.Windows != nil && it.Limit.IsWindow() {
			it.Limit.WindowStart = d.Windows[i] // the window the take counted in
		}
		served = append(served, it)
	}
	if len(served) == 0 {
		return
	}
	m, id := x.m, h.id
	// A leased bucket's take cannot be voided (bucket.Leased spent part of
	// it from its lease, which took it from the bucket before): its cost
	// goes back to the bucket as a refund, as an empty id's takes do.
	var voided []bucket.Item
	var deltas []bucket.Delta
	for _, it := range served {
		if id != "" && it.Lease.Size == 0 {
			voided = append(voided, it)
		} else {
			deltas = append(deltas, bucket.Delta{Key: it.Key, Limit: it.Limit, Units: -it.Cost})
		}
	}
	var err error
	if len(voided) > 0 {
		err = m.opt.Store.Void(context.Background(), id, voided)
	}
	if len(deltas) > 0 {
		err = errors.Join(err, m.opt.Store.Reconcile(context.Background(), "", deltas))
	}
	if err != nil {
		m.log.Warn("could not give back the take of the store's healthy part", "err", err, "request_id", x.req.ID)
	}
}

// reconcile applies deltas (each of rule owners[j] of x) where their
// rules' reservations were taken: the store, or the node's fallback for a
// rule it judged (Applied.Fallback).
func (x *Exchange) reconcile(deltas []bucket.Delta, owners []int) {
	m := x.m
	if !x.fallback {
		x.reconcileIn(m.opt.Store, deltas)
		return
	}
	all := true
	for i := range x.rules {
		all = all && x.rules[i].Fallback
	}
	if all {
		x.reconcileIn(m.opt.Fallback, deltas) // the reservation was taken there
		return
	}
	var st, fb []bucket.Delta
	for j, dl := range deltas {
		if x.rules[owners[j]].Fallback {
			fb = append(fb, dl)
		} else {
			st = append(st, dl)
		}
	}
	x.reconcileIn(m.opt.Store, st)
	x.reconcileIn(m.opt.Fallback, fb)
}

// reconcileIn applies deltas in store, logging a failure.
func (x *Exchange) reconcileIn(store bucket.Store, deltas []bucket.Delta) {
	if len(deltas) == 0 {
		return
	}
	// No deadline here either: a remote store's reconciliations are
	// queued (bucket.AsyncReconciler) and bounded there.
	if err := store.Reconcile(context.Background(), x.req.ID, deltas); err != nil {
		x.m.log.Warn("reconcile failed", "err", err, "request_id", x.req.ID)
	}
}
