package bucket

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxReturnBatch bounds the deltas of one store call that gives units back.
const maxReturnBatch = 256

// pendingReturn is units to give back to a bucket, and the counters of the
// lease they came from.
type pendingReturn struct {
	d Delta
	c *leaseCounters
}

// giveBack moves n units out of e (whose mu the caller holds) into the
// next flush.
func (l *Leased) giveBack(e *lease, n int64) {
	if n <= 0 {
		return
	}
	e.add(-n)
	l.queue(Delta{Key: e.key, Limit: e.limit, Units: -n}, e.c)
}

// queue adds a return (d.Units < 0) to the next flush; its units count as
// outstanding until then.
func (l *Leased) queue(d Delta, c *leaseCounters) {
	c.returned.Add(1)
	c.returnedUnits.Add(uint64(-d.Units))
	c.outstanding.Add(-d.Units)
	l.pendMu.Lock()
	l.pending = append(l.pending, pendingReturn{d: d, c: c})
	l.pendMu.Unlock()
}

// flush gives back every queued return, in store calls of at most
// maxReturnBatch deltas, each under a return id of its own (so that the
// store applies it once, even when the call is retried). A call that fails
// loses its units to the bucket until it refills (under-admission, never
// over): counted, reported to OnReturnError and returned.
func (l *Leased) flush() error {
	l.pendMu.Lock()
	pending := l.pending
	l.pending = nil
	l.pendMu.Unlock()
	var errs []error
	for len(pending) > 0 {
		n := min(len(pending), maxReturnBatch)
		chunk := pending[:n]
		pending = pending[n:]
		deltas := make([]Delta, n)
		for i, p := range chunk {
			deltas[i] = p.d
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.o.ReturnTimeout)
		err := l.store.Reconcile(ctx, l.returnID(), deltas)
		cancel()
		for _, p := range chunk {
			p.c.outstanding.Add(p.d.Units)
		}
		if err != nil {
			for _, p := range chunk {
				p.c.lostUnits.Add(uint64(-p.d.Units))
			}
			if l.o.OnReturnError != nil {
				l.o.OnReturnError(err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// returnID names one store call that gives units back: unique per Leased
// (a random node id) and per call.
func (l *Leased) returnID() string {
	return "lease:" + l.node + ":" + strconv.FormatUint(l.seq.Add(1), 10)
}

// Sweep gives back what every lease expired at now still holds, forgets the
// buckets that held no lease for IdleFor and the failed takes and voids
// older than VoidFor, and sends every return queued (see flush; the error
// is that of the store calls that failed). The goroutine calls it every
// SweepEvery with the clock's reading; callers may call it at any time.
func (l *Leased) Sweep(now time.Time) error {
	var idle []string
	l.mu.RLock()
	for key, e := range l.leases {
		e.mu.Lock()
		if e.flight == nil && e.units > 0 && !now.Before(e.expires) {
			l.giveBack(e, e.units)
		}
		if e.flight == nil && e.units == 0 && now.Sub(e.lastUse) >= l.o.IdleFor {
			idle = append(idle, key)
		}
		e.mu.Unlock()
	}
	l.mu.RUnlock()
	if len(idle) > 0 {
		l.mu.Lock()
		for _, key := range idle {
			e := l.leases[key]
			if e == nil {
				continue
			}
			e.mu.Lock()
			if e.flight == nil && e.units == 0 && now.Sub(e.lastUse) >= l.o.IdleFor {
				e.retired = true
				delete(l.leases, key)
			}
			e.mu.Unlock()
		}
		l.mu.Unlock()
	}
	l.sweepMu.Lock()
	if now.Sub(l.voidsSwept) >= time.Second || now.Before(l.voidsSwept) {
		l.voidsSwept = now
		l.voids.sweep(now)
	}
	l.sweepMu.Unlock()
	return l.flush()
}

func (l *Leased) sweepLoop(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.Sweep(l.o.Now())
		}
	}
}

// ReturnAll gives back every lease held, expired or not, and forgets every
// bucket's state, as on a config reload (a limit may have changed). A take
// acquiring a lease meanwhile gives its lease back when it ends. The error
// is that of the store calls that failed (see Sweep).
func (l *Leased) ReturnAll() error {
	l.mu.Lock()
	old := l.leases
	l.leases = map[string]*lease{}
	l.mu.Unlock()
	for _, e := range old {
		e.mu.Lock()
		e.retired = true
		l.giveBack(e, e.units)
		e.mu.Unlock()
	}
	return l.flush()
}

// Close stops the sweep goroutine and gives every lease back (ReturnAll);
// later takes go to the store as they are, and a take still running gives
// its lease back when it ends. Close the store below after it, so that the
// returns it queues there are sent. Safe to call more than once.
func (l *Leased) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		if l.stop != nil {
			close(l.stop)
			<-l.done
		}
	})
	return l.ReturnAll()
}

// Reconcile implements Store by passing deltas to the store: a leased
// bucket is reconciled in the shared bucket, as any other.
func (l *Leased) Reconcile(ctx context.Context, requestID string, deltas []Delta) error {
	return l.store.Reconcile(ctx, requestID, deltas)
}

// Void implements Store for the takes Leased made. A take of requestID that
// failed (and may have been applied) within VoidFor is voided in the store
// as it was sent there (the items it sent, under the request id it used),
// once. For any other requestID, the items without a lease are voided in
// the store as given, and requestID is remembered for VoidFor, so that a
// later take of it through this Leased fails with ErrVoided. A take that
// succeeded is not undone for its leased items (what a lease paid locally
// stays spent; the store keeps what it took for them): a caller voids only
// takes that failed, as AsyncReconciler does. Errors: ErrInvalid for an
// empty requestID or invalid items; the store's.
func (l *Leased) Void(ctx context.Context, requestID string, items []Item) error {
	if err := validateVoid(requestID, items); err != nil {
		return err
	}
	if !leasedItems(items) {
		return l.store.Void(ctx, requestID, items)
	}
	sent, ok := l.voids.void(requestID, l.o.Now())
	if !ok {
		var plain []Item
		for _, it := range items {
			if it.Lease.Size == 0 {
				plain = append(plain, it)
			}
		}
		if len(plain) == 0 {
			return nil
		}
		return l.store.Void(ctx, requestID, plain)
	}
	var errs []error
	for _, s := range sent {
		errs = append(errs, l.store.Void(ctx, s.id, s.items))
	}
	return errors.Join(errs...)
}

// maxVoidMemory bounds the failed takes and voids a Leased remembers.
const maxVoidMemory = 1 << 16

// voidMemory remembers the store calls of takes that failed, for Void, and
// the request ids voided, for later takes. Safe for concurrent use.
type voidMemory struct {
	voidFor time.Duration
	n       atomic.Int64 // entries, so that takes skip the lock when none
	mu      sync.Mutex
	takes   map[string]*voidEntry
}

// voidEntry is one request id's failed store calls, or its tombstone.
type voidEntry struct {
	at     time.Time
	sent   []sentTake
	voided bool
}

// sentTake is one store call of a take: the request id it used and the
// items it sent.
type sentTake struct {
	id    string
	items []Item
}

func (v *voidMemory) init(voidFor time.Duration) {
	v.voidFor = voidFor
	v.takes = map[string]*voidEntry{}
}

// failed remembers that requestID's take sent items under id and failed.
func (v *voidMemory) failed(requestID, id string, items []Item, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.takes[requestID]
	if e == nil {
		if len(v.takes) >= maxVoidMemory {
			return // a void of it then finds nothing to void: the store's own void (AsyncReconciler) still runs
		}
		e = &voidEntry{}
		v.takes[requestID] = e
		v.n.Add(1)
	}
	e.at = now
	e.sent = append(e.sent, sentTake{id: id, items: items})
}

// void marks requestID voided and returns its failed store calls, once:
// ok is false when none is remembered (or they were voided already).
func (v *voidMemory) void(requestID string, now time.Time) (sent []sentTake, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.takes[requestID]
	if e == nil {
		if len(v.takes) >= maxVoidMemory {
			return nil, false
		}
		e = &voidEntry{}
		v.takes[requestID] = e
		v.n.Add(1)
	}
	sent, ok = e.sent, len(e.sent) > 0 && !e.voided
	e.at, e.voided, e.sent = now, true, nil
	return sent, ok
}

// voided reports whether requestID was voided.
func (v *voidMemory) voided(requestID string) bool {
	if v.n.Load() == 0 {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.takes[requestID]
	return e != nil && e.voided
}

// sweep forgets what is older than voidFor at now.
func (v *voidMemory) sweep(now time.Time) {
	if v.n.Load() == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, e := range v.takes {
		if now.Sub(e.at) >= v.voidFor {
			delete(v.takes, id)
			v.n.Add(-1)
		}
	}
}

// LeaseStats counts what a Leased did with the leases of one label (one
// rule) since it was created.
type LeaseStats struct {
	Taken         uint64 // leases acquired: takes whose fill joined a lease
	TakenUnits    uint64 // units acquired for leases (fills), in the limit's units
	Returned      uint64 // returns: unused units given back (expiry, reload, close, a denial's deductions)
	ReturnedUnits uint64 // units given back
	LostUnits     uint64 // of ReturnedUnits, those whose store call failed (regained by refill)
	Served        uint64 // takes of an item served from its lease, without a store call for it
	// Outstanding is the units taken from the shared bucket and neither
	// admitted nor given back yet: held in leases, or on their way back
	// (queued until the next sweep, at most SweepEvery).
	Outstanding int64
}

// leaseCounters are one label's LeaseStats, updated atomically.
type leaseCounters struct {
	taken, takenUnits, returned, returnedUnits, lostUnits, served atomic.Uint64
	outstanding                                                   atomic.Int64
}

// counters returns label's counters, creating them.
func (l *Leased) counters(label string) *leaseCounters {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	c := l.stats[label]
	if c == nil {
		c = &leaseCounters{}
		l.stats[label] = c
	}
	return c
}

// Stats returns the counts by lease label (Lease.Label), for every label
// a take has used. Safe to call at any time.
func (l *Leased) Stats() map[string]LeaseStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	out := make(map[string]LeaseStats, len(l.stats))
	for label, c := range l.stats {
		out[label] = LeaseStats{
			Taken: c.taken.Load(), TakenUnits: c.takenUnits.Load(),
			Returned: c.returned.Load(), ReturnedUnits: c.returnedUnits.Load(), LostUnits: c.lostUnits.Load(),
			Served: c.served.Load(), Outstanding: c.outstanding.Load(),
		}
	}
	return out
}
