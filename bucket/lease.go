package bucket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Lease says how a Leased store may serve one item's token bucket from
// memory (DESIGN.md §5, hot keys). The zero Lease: the item is not leased.
// Leases apply to token buckets only: a quota does not refill, so units a
// node held when it died would be lost to the quota until its period ends,
// not regained in Size × Per / Rate.
type Lease struct {
	// Size is the most units of the bucket a node holds on lease at once,
	// in the limit's units (tokens, requests, micro-USD): at least 1. A
	// lease is taken as one take, and a take above Capacity never passes:
	// an item whose Capacity is below Size (a region's share of a limit, a
	// shard) leases at most its Capacity. 0: the item is not leased.
	Size int64
	// TTL is how long a lease may be spent after it is taken, by the Leased
	// store's clock; what is left then goes back to the shared bucket.
	// Positive when Size is set.
	TTL time.Duration
	// Label names the lease's counts in LeaseStats: the rule's name, so
	// that the set of labels is bounded by the config.
	Label string
}

// validate checks it's lease: the error wraps ErrInvalid. A Size above the
// item's Capacity is not an error: the fill never exceeds the Capacity.
func (ls Lease) validate(it Item) error {
	switch {
	case ls.Size < 0:
		return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("lease size %d is negative: %w", ls.Size, ErrInvalid)}
	case ls.Size == 0:
		return nil
	case it.Limit.IsQuota():
		return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("a lease applies to token buckets only, not to a quota: %w", ErrInvalid)}
	case it.Limit.IsWindow():
		return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("a lease applies to token buckets only, not to a %s: %w", it.Limit.Algorithm, ErrInvalid)}
	case ls.TTL <= 0:
		return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("lease ttl %v is not positive: %w", ls.TTL, ErrInvalid)}
	}
	return nil
}

// shard is ls for one of k shards of its bucket (TakeSharded): Size
// divided by k, rounded up, so that a node's leases on every shard hold
// about Size together.
func (ls Lease) shard(k int) Lease {
	if ls.Size > 0 && k > 1 {
		ls.Size = (ls.Size + int64(k) - 1) / int64(k)
	}
	return ls
}

// DefaultLeaseShare is LeaseOptions.Share's default: a lease takes at most
// a quarter of what its bucket is estimated to hold beyond the request's own
// cost.
const DefaultLeaseShare = 0.25

// DefaultLeaseSweep is LeaseOptions.SweepEvery's default: an expired lease
// goes back at most this long after its TTL.
const DefaultLeaseSweep = 20 * time.Millisecond

// LeaseOptions configures NewLeased. The zero value is a usable default.
type LeaseOptions struct {
	// Now is the clock leases expire by and refills are estimated with;
	// nil means time.Now. The shared bucket keeps its own clock (Redis
	// TIME): this one only decides when a lease is spent no more.
	Now func() time.Time
	// Share bounds a lease by the bucket's level: a lease takes at most
	// Share × (estimated level − the request's own cost), so that near
	// empty no node holds the last units while others are denied; in
	// (0, 1], 0 or out of range means DefaultLeaseShare (1/4).
	Share float64
	// SweepEvery is how often a background goroutine calls Sweep, which
	// gives back expired leases; 0 means DefaultLeaseSweep (20ms), a
	// negative value starts no goroutine (call Sweep yourself).
	SweepEvery time.Duration
	// IdleFor is how long the state of a bucket that holds no lease is
	// kept (its last level seen, for the next lease's size); 0 means 10s.
	IdleFor time.Duration
	// ReturnTimeout bounds each store call that gives units back; 0 means
	// one second.
	ReturnTimeout time.Duration
	// VoidFor is how long a take that failed (and may have been applied)
	// is remembered for Void, and a Void's tombstone for a later take; 0
	// means DefaultVoidWindow.
	VoidFor time.Duration
	// OnReturnError, when set, is called with the error of a store call
	// that failed to give units back (those units are then lost to the
	// shared bucket until it refills: under-admission, never over). It is
	// called from the goroutine that gave them back (Sweep, ReturnAll,
	// Close).
	OnReturnError func(err error)
}

// Leased is a Store that serves leased items (Item.Lease) from leases held
// in memory, so that a hot bucket (a busy tenant, a global limit) costs one
// store call per lease instead of one per request. It wraps the shared
// store (Redis, Redis Cluster; in production the AsyncReconciler over the
// Guarded store).
//
// A lease is capacity already taken: a node takes up to Lease.Size units
// from the shared bucket in one take and admits from memory until the lease
// is spent or its TTL passes; then what is left goes back to the bucket (a
// negative reconciliation delta, once per return id). Every unit a node
// admits was taken from the shared bucket first, so the fleet never admits
// more than the limit: capacity + rate × elapsed since the bucket was last
// full with no lease out. Over a window that starts while leases are out,
// the fleet may admit those units on top of capacity + rate × window (the
// bucket refilled the room they left): at most what the leases held then
// (LeaseStats.Outstanding). A node that dies loses what its leases hold (at
// most Size per bucket, plus unused units not yet sent back), which the
// bucket regains by refilling, within Size × Per / Rate.
//
// Take serves each leased item from its lease when the lease covers the
// cost. Otherwise the request spends what the lease holds and sends the
// rest of its cost to the store, plus a new lease (the fill), in the same
// two-phase Take as its other items: one round trip, and a denial spends
// nothing (local deductions are put back). The fill is at most Size and at
// most Share of the level the bucket is estimated to hold beyond the
// request (its last reported Remaining, refilled since by this node's
// clock), so leases shrink as the bucket runs low. A take denied while
// asking for a fill is taken again at once without one (a second round
// trip, under a derived request id), so that a request whose own cost fits
// is admitted and a denial reports the wait for its own cost
// (Decision.RetryAfter), never the lease's. One take per bucket acquires a
// lease at a time (single flight): a take that finds another acquiring
// waits for it when it has nothing else to send to the store (up to 8
// times; what it asks for is reserved for it in the lease to come, so that
// takes that did not wait cannot spend it first), and otherwise sends its
// own cost without a fill. No lock is held across a store call.
//
// Items without a lease, and items whose cost exceeds their capacity
// (TooLarge, as the store decides), go to the store as they are; a take of
// such items only is passed through unchanged. Reconcile passes through:
// reconciliation deltas of leased buckets apply to the shared bucket.
// While the store is unavailable, leases held may still be spent; a take
// that needs the store fails as the store's does, with its local
// deductions put back. A take made with WithPartial is served in part
// instead when the store's part failed for some items only (a Redis
// Cluster master down: a *PartialError), or whole while other items were
// served by their leases: the failed items' deductions are put back, their
// leases keep what they hold (spendable by later takes), and the take
// returns the Decision over the served items with a *PartialError naming
// the failed ones (see PartialError). A failed refill's lease comes back
// when the master does: units the lease held when its return failed are
// lost to the bucket until it refills (OnReturnError).
//
// The statuses of leased items in a Decision are this node's estimate: the
// level the store last reported, refilled since, plus what the lease holds.
//
// Leases are pointless over the Memory store (one process holds the
// buckets already) and are not used there. It is safe for concurrent use.
// Create one with NewLeased; Close stops the sweep and gives every lease
// back.
type Leased struct {
	store Store
	o     LeaseOptions
	node  string // prefix of return ids, unique per Leased
	seq   atomic.Uint64

	mu     sync.RWMutex
	leases map[string]*lease

	pendMu  sync.Mutex
	pending []pendingReturn // units to give back at the next flush

	voids      voidMemory
	voidsSwept time.Time // when Sweep last forgot old voids (once a second at most); guarded by sweepMu
	sweepMu    sync.Mutex

	statsMu sync.Mutex
	stats   map[string]*leaseCounters

	waiting atomic.Int64 // takes waiting for another's lease acquisition

	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ Store = (*Leased)(nil)

// lease is one bucket's lease on this node, and what this node knows of
// the bucket. Its fields are guarded by mu.
type lease struct {
	mu      sync.Mutex
	key     string
	limit   Limit     // the limit units were taken under
	units   int64     // units held, spendable until expires
	expires time.Time // when units stop being spendable
	seen    int64     // the bucket's Remaining as the store last reported it
	seenAt  time.Time // when seen was reported (this node's clock); zero: never
	lastUse time.Time
	flight  chan struct{} // non-nil while a take acquires a lease here; closed when it ends
	retired bool          // removed from the map: units arriving here go back
	c       *leaseCounters
	// waitCost is the units asked for by the takes waiting for flight;
	// when it ends with a lease, that much of units (at most) is reserved
	// for takes that waited: a take that did not wait spends only units −
	// reserved, so that the takes woken by a lease are not beaten to it by
	// those already running (which would send them to the store).
	waitCost, reserved int64
}

// add changes the units held, and the outstanding count with them; the
// reserved units are never more than those held.
func (e *lease) add(n int64) {
	e.units += n
	e.c.outstanding.Add(n)
	e.reserved = max(0, min(e.reserved, e.units))
}

// avail is the units a take may spend: all of them for a take that waited
// for this node's last lease, else those not reserved for such takes.
func (e *lease) avail(waited bool) int64 {
	if waited {
		return e.units
	}
	return e.units - e.reserved
}

// level estimates the bucket's level at now, leases excluded: the last
// Remaining seen, refilled since; the capacity when never seen.
func (e *lease) level(now time.Time) float64 {
	capacity, rate, per := e.limit.floats()
	if e.seenAt.IsZero() {
		return capacity
	}
	level, _ := refill(float64(e.seen), e.seenAt.UnixMicro(), capacity, rate, per, now.UnixMicro())
	return level
}

// status is the item's Status as this node sees it: the level estimate
// plus the units held, at most the capacity.
func (e *lease) status(now time.Time) Status {
	capacity, rate, per := e.limit.floats()
	return status(min(capacity, math.Floor(e.level(now))+float64(e.units)), capacity, rate, per)
}

// NewLeased returns a Leased over store configured by o. It starts the
// sweep goroutine unless o.SweepEvery is negative.
func NewLeased(store Store, o LeaseOptions) *Leased {
	if o.Now == nil {
		o.Now = time.Now
	}
	if !(o.Share > 0 && o.Share <= 1) {
		o.Share = DefaultLeaseShare
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = DefaultLeaseSweep
	}
	if o.IdleFor <= 0 {
		o.IdleFor = 10 * time.Second
	}
	if o.ReturnTimeout <= 0 {
		o.ReturnTimeout = time.Second
	}
	if o.VoidFor <= 0 {
		o.VoidFor = DefaultVoidWindow
	}
	var id [6]byte
	rand.Read(id[:])
	l := &Leased{
		store:  store,
		o:      o,
		node:   hex.EncodeToString(id[:]),
		leases: map[string]*lease{},
		stats:  map[string]*leaseCounters{},
	}
	l.voids.init(o.VoidFor)
	if o.SweepEvery > 0 {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.sweepLoop(o.SweepEvery)
	}
	return l
}

// leasedItems reports whether any item carries a lease.
func leasedItems(items []Item) bool {
	for _, it := range items {
		if it.Lease.Size != 0 {
			return true
		}
	}
	return false
}

// maxWaits bounds how often one take waits for another's lease
// acquisition before it goes to the store itself.
const maxWaits = 8

// Take implements Store, serving leased items from leases (see Leased).
// Errors: ErrInvalid (the items as Memory validates them, or a lease that
// is negative, on a quota, above the capacity or with no TTL); ErrVoided
// when requestID was voided first; ctx's error while waiting for another
// take's lease; otherwise the store's, with every local deduction put back.
// A take of items without leases, or after Close, is the store's Take.
func (l *Leased) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	if !leasedItems(items) || l.closed.Load() {
		return l.store.Take(ctx, requestID, items)
	}
	if err := validateItems(items); err != nil {
		return Decision{}, err
	}
	for _, it := range items {
		if err := it.Lease.validate(it); err != nil {
			return Decision{}, err
		}
	}
	if requestID != "" && l.voids.voided(requestID) {
		return Decision{}, &StoreError{Op: "take", Subject: items[0].Key, Err: ErrVoided}
	}
	now := l.o.Now()
	for waits := 0; ; waits++ {
		p := l.plan(items, now, waits < maxWaits, waits > 0)
		if p.wait == nil {
			return l.run(ctx, requestID, items, p, now)
		}
		l.waiting.Add(1)
		select {
		case <-p.wait:
		case <-ctx.Done():
			l.waiting.Add(-1)
			return Decision{}, &StoreError{Op: "take", Subject: items[0].Key, Err: fmt.Errorf("waiting for a lease: %w", ctx.Err())}
		}
		l.waiting.Add(-1)
		now = l.o.Now()
	}
}

// use is what a take does with one item.
type use struct {
	e      *lease // the item's lease; nil when it is not leased
	local  int64  // units spent from the lease
	fill   int64  // units taken for the lease on top of the request's cost
	owner  bool   // this take holds e's flight
	remote bool   // the item goes to the store, for Cost − local + fill
	// flight is another take's acquisition of e's lease, which this
	// take would wait for.
	flight chan struct{}
}

// plan is what a take does with each of its items, decided under each
// lease's lock in turn: the local deductions are made. wait, when set, is
// another take's lease acquisition to wait for before planning again; the
// plan then holds nothing.
type plan struct {
	uses []use
	wait <-chan struct{}
}

// plan deducts what the leases cover and decides what goes to the store.
// With mayWait, a take whose only store-bound items are those whose lease
// another take is acquiring waits for it instead (its deductions put back),
// and asks for its costs to be reserved in the lease to come. waited says
// the take has waited: it may spend reserved units.
func (l *Leased) plan(items []Item, now time.Time, mayWait, waited bool) plan {
	p := plan{uses: make([]use, len(items))}
	storeBound := false // some item goes to the store whatever happens
	var wait <-chan struct{}
	for i, it := range items {
		u := &p.uses[i]
		if it.Lease.Size == 0 || it.Cost > it.Limit.Capacity {
			u.remote, storeBound = true, true
			continue
		}
		e := l.lock(it, now)
		u.e = e
		avail := e.avail(waited)
		switch {
		case avail >= it.Cost:
			u.local = it.Cost
		case e.flight != nil: // another take is acquiring a lease here
			u.local, u.remote, u.flight = avail, true, e.flight
			if wait == nil {
				wait = e.flight
			}
		default:
			u.local, u.remote = avail, true
			u.fill = l.fill(e, it, avail, now)
			if u.fill > 0 {
				e.flight, u.owner = make(chan struct{}), true
			}
			storeBound = true
		}
		reserved := e.reserved
		e.add(-u.local)
		if waited {
			e.reserved = max(0, reserved-u.local)
		}
		e.mu.Unlock()
	}
	if wait != nil && mayWait && !storeBound {
		l.putBack(items, p.uses)
		for i, u := range p.uses {
			if u.flight == nil {
				continue
			}
			u.e.mu.Lock()
			if u.e.flight == u.flight {
				u.e.waitCost += items[i].Cost
			}
			u.e.mu.Unlock()
		}
		return plan{wait: wait}
	}
	return p
}

// fill is the lease a take of it acquires on top of its own cost, once the
// avail units it may spend of the lease are spent toward it: at most Size,
// at most Share of the level estimated beyond the request's remote cost,
// and never so much that the take exceeds the capacity. Zero near empty.
func (l *Leased) fill(e *lease, it Item, avail int64, now time.Time) int64 {
	need := float64(it.Cost - avail)
	f := min(float64(it.Lease.Size), math.Floor(l.o.Share*(e.level(now)-need)), float64(it.Limit.Capacity)-need)
	if f < 1 {
		return 0
	}
	return int64(f)
}

// lock returns it's lease, locked, creating it if need be. A lease taken
// under another limit (a reload changed it) or expired gives its units
// back first.
func (l *Leased) lock(it Item, now time.Time) *lease {
	for {
		l.mu.RLock()
		e := l.leases[it.Key]
		l.mu.RUnlock()
		if e == nil {
			l.mu.Lock()
			if e = l.leases[it.Key]; e == nil {
				e = &lease{key: it.Key, limit: it.Limit, c: l.counters(it.Lease.Label)}
				l.leases[it.Key] = e
			}
			l.mu.Unlock()
		}
		e.mu.Lock()
		if e.retired {
			e.mu.Unlock()
			continue
		}
		if e.limit != it.Limit {
			l.giveBack(e, e.units)
			e.limit, e.seenAt = it.Limit, time.Time{}
		} else if e.units > 0 && !now.Before(e.expires) {
			l.giveBack(e, e.units)
		}
		e.lastUse = now
		return e
	}
}

// run sends a plan's store-bound items to the store (when there are any)
// and settles the leases with the outcome.
func (l *Leased) run(ctx context.Context, requestID string, items []Item, p plan, now time.Time) (Decision, error) {
	remote, at := remoteItems(items, p.uses)
	if len(remote) == 0 {
		d := Decision{Allowed: true, DeniedBy: -1, Buckets: make([]Status, len(items))}
		l.finish(items, p.uses, d, nil, now)
		return d, nil
	}
	id := requestID
	d, err := l.store.Take(ctx, id, remote)
	if err == nil && !d.Allowed && !d.TooLarge && deniedAskingALease(d, at, p.uses) {
		// Denied by a bucket asked for a lease: learn the levels, and take
		// again for the request's own cost only, under a request id of its
		// own (in Redis Cluster the denial voided the first id's earlier
		// groups). A denial by a bucket asked for no lease stands: the
		// take again would ask it for the same cost (one store call and,
		// over a DenyCache, one cached denial a request, not two).
		l.observe(items, p.uses, at, d, nil, now)
		for i := range p.uses {
			p.uses[i].fill = 0
		}
		remote, at = remoteItems(items, p.uses)
		if id != "" {
			id += "#lease"
		}
		d, err = l.store.Take(ctx, id, remote)
	}
	var failed []bool // by item: its store-bound part failed (a take served in part)
	if err != nil && PartialAllowed(ctx) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrVoided) {
		failed = l.failedPart(items, p.uses, remote, at, &d, err)
	}
	if err != nil && failed == nil {
		if id != "" && MayHaveApplied(err) {
			l.voids.failed(requestID, id, remote, now)
		}
		l.putBack(items, p.uses)
		l.release(items, p.uses, false, now)
		return Decision{}, err
	}
	l.observe(items, p.uses, at, d, failed, now)
	if !d.Allowed {
		l.putBack(items, p.uses)
	}
	out := Decision{Allowed: d.Allowed, DeniedBy: -1, TooLarge: d.TooLarge, RetryAfter: d.RetryAfter, Cached: d.Cached,
		Buckets: make([]Status, len(items))}
	if !d.Allowed {
		out.DeniedBy = at[d.DeniedBy]
	}
	if d.Windows != nil { // the window counters' windows, at their items
		out.Windows = make([]time.Time, len(items))
		for j, i := range at {
			out.Windows[i] = d.Windows[j]
		}
	}
	l.finish(items, p.uses, out, &d, now)
	if failed != nil {
		pe := &PartialError{Err: err}
		if q := AsPartial(err); q != nil {
			pe.Err, pe.causes = q.Err, q.causes
		}
		for i, f := range failed {
			if f {
				pe.Failed = append(pe.Failed, i)
				out.Buckets[i] = Status{} // not known
			}
		}
		return out, pe
	}
	return out, nil
}

// failedPart handles err, the failure of a take's store-bound items
// (remote, at their items' indexes at) made with WithPartial, for a take
// that may be served in part: the part served by the store (a
// *PartialError's Decision, *d) or from the leases alone (a whole failure
// when some item was served by its lease) stands. Each failed item's local
// deduction is put back in its lease and it asks for no fill (the lease
// keeps what it holds: still spendable). A failed part that may have been
// applied is not remembered for Void: the store below voids it (an
// AsyncReconciler voids a PartialError's failed items, and a failure's,
// under id). It returns which items failed, nil when
// the take fails whole (nothing served: every item went to the store and
// failed), and sets *d to the store's Decision over remote, the failed
// items' Statuses zero.
func (l *Leased) failedPart(items []Item, uses []use, remote []Item, at []int, d *Decision, err error) []bool {
	pe := AsPartial(err)
	if pe == nil {
		if len(remote) == len(items) {
			return nil // every item went to the store
		}
		// Failed whole: what the leases served alone stands.
		*d = Decision{Allowed: true, DeniedBy: -1, Buckets: make([]Status, len(remote))}
		pe = &PartialError{Failed: make([]int, len(remote)), Err: err}
		for j := range remote {
			pe.Failed[j] = j
		}
	} else if len(d.Buckets) != len(remote) {
		return nil
	}
	failed := make([]bool, len(items))
	for _, j := range pe.Failed {
		if j < 0 || j >= len(at) {
			continue
		}
		i := at[j]
		failed[i] = true
		u := &uses[i]
		if u.local != 0 {
			l.putBack(items[i:i+1], uses[i:i+1])
			u.local = 0
		}
		u.fill = 0 // its flight ends with no lease
	}
	return failed
}

// remoteItems returns the items a plan sends to the store, each for its
// cost less what its lease paid plus its fill, and the index in items of
// each.
func remoteItems(items []Item, uses []use) ([]Item, []int) {
	var remote []Item
	var at []int
	for i, it := range items {
		u := uses[i]
		if !u.remote {
			continue
		}
		remote = append(remote, Item{Key: it.Key, Limit: it.Limit, Cost: it.Cost - u.local + u.fill})
		at = append(at, i)
	}
	return remote, at
}

// deniedAskingALease says a denial d of the store-bound items (at maps
// them to the take's items) came from a bucket this take asked for a
// lease's fill on top of its cost.
func deniedAskingALease(d Decision, at []int, uses []use) bool {
	return d.DeniedBy >= 0 && d.DeniedBy < len(at) && uses[at[d.DeniedBy]].fill > 0
}

// observe records the levels the store reported for leased items (of a
// denial answered from a DenyCache, only the denying item's is known; of
// the items failed marks, none).
func (l *Leased) observe(items []Item, uses []use, at []int, d Decision, failed []bool, now time.Time) {
	for j, i := range at {
		e := uses[i].e
		if e == nil || d.Cached && j != d.DeniedBy || failed != nil && failed[i] {
			continue
		}
		e.mu.Lock()
		if !e.retired && e.limit == items[i].Limit {
			e.seen, e.seenAt = d.Buckets[j].Remaining, now
		}
		e.mu.Unlock()
	}
}

// putBack returns a take's local deductions to their leases (or, for a
// lease retired or re-limited meanwhile, to the shared bucket).
func (l *Leased) putBack(items []Item, uses []use) {
	for i, u := range uses {
		if u.local == 0 {
			continue
		}
		u.e.mu.Lock()
		if u.e.retired || u.e.limit != items[i].Limit {
			l.queue(Delta{Key: items[i].Key, Limit: items[i].Limit, Units: -u.local}, u.e.c)
		} else {
			u.e.add(u.local)
		}
		u.e.mu.Unlock()
	}
}

// release ends the flights a take holds; with taken, its fills join their
// leases (or go back, for a lease retired or re-limited meanwhile), which
// expire a TTL after now.
func (l *Leased) release(items []Item, uses []use, taken bool, now time.Time) {
	for i, u := range uses {
		if !u.owner {
			continue
		}
		e, it := u.e, items[i]
		e.mu.Lock()
		if taken && u.fill > 0 {
			e.c.taken.Add(1)
			e.c.takenUnits.Add(uint64(u.fill))
			if e.retired || e.limit != it.Limit {
				l.queue(Delta{Key: it.Key, Limit: it.Limit, Units: -u.fill}, e.c)
			} else {
				e.add(u.fill)
				e.expires = now.Add(it.Lease.TTL)
				e.reserved = min(e.waitCost, e.units)
			}
		}
		close(e.flight)
		e.flight, e.waitCost = nil, 0
		e.mu.Unlock()
	}
}

// finish ends a take that reached a decision: the fills join their leases
// when admitted, the flights end, and out's statuses are filled: the
// store's for items without a lease, this node's estimate for leased ones.
func (l *Leased) finish(items []Item, uses []use, out Decision, d *Decision, now time.Time) {
	l.release(items, uses, out.Allowed, now)
	j := 0
	for i, u := range uses {
		if u.remote {
			if u.e == nil {
				out.Buckets[i] = d.Buckets[j]
			}
			j++
		}
		if u.e == nil {
			continue
		}
		u.e.mu.Lock()
		out.Buckets[i] = u.e.status(now)
		u.e.mu.Unlock()
		if out.Allowed && !u.remote {
			u.e.c.served.Add(1)
		}
	}
	if l.closed.Load() {
		l.flush() // Close has run: nothing else will send what this take gave back
	}
}
