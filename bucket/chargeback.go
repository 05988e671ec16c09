package bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ChargeDrop says why a ChargeBack gave up a charge without the store
// applying it.
type ChargeDrop uint8

const (
	// DropPeriodEnded: the period the units were spent in had ended on the
	// node's clock before the charge reached the store (a quota's
	// WindowEnd; a fixed window's end; a sliding window's end plus one Per,
	// while it still weighs in the next window). The units are never moved
	// into a later period.
	DropPeriodEnded ChargeDrop = iota
	// DropFull: ChargeOptions.MaxHeld (bucket, period) pairs were already
	// held.
	DropFull
	// DropExpired: a send that may have reached the store failed, and the
	// retries under the same request id went on for MaxHold: a later retry
	// could apply the charge twice once the store forgets the id.
	DropExpired
	// DropRefused: the store refused the charge as invalid (ErrInvalid),
	// which a retry would not heal.
	DropRefused
	numChargeDrops
)

// String returns "period_ended", "full", "expired" or "refused".
func (d ChargeDrop) String() string {
	return [...]string{"period_ended", "full", "expired", "refused"}[d]
}

// ChargeDrops lists every ChargeDrop, for metrics that make each label at
// start.
var ChargeDrops = [...]ChargeDrop{DropPeriodEnded, DropFull, DropExpired, DropRefused}

// DefaultChargeBatch is ChargeOptions.Batch's default: the deltas one
// charge (one request id, one Reconcile) carries.
const DefaultChargeBatch = 64

// ChargeOptions configures NewChargeBack. Store is required; the zero
// value of every other field is a documented default.
type ChargeOptions struct {
	// Store is the shared store charged: in production the Guarded Redis
	// store, called directly (ChargeBack holds and retries its own charges;
	// an AsyncReconciler would drop them after its MaxHold, counted from
	// the start of the outage).
	Store Store
	// Now is the node's clock, which decides whether a charge's period has
	// ended (the store's script decides again on the store's clock: see
	// ChargeBack); nil means time.Now.
	Now func() time.Time
	// MaxHeld bounds the (bucket, period) pairs held, owed and not yet
	// applied; 0 means 100000. A charge on a new pair past it is dropped
	// (DropFull).
	MaxHeld int
	// MaxHold is how long a charge whose send may have reached the store
	// (MayHaveApplied) is retried under its request id; past it, it is
	// dropped (DropExpired). Keep it below the store's once-per-request-id
	// window (RedisOptions.DedupFor, 10 minutes); 0 means 9 minutes. A
	// charge the store never saw (ErrNotSent, a refused connection) is
	// held without bound, however long the outage.
	MaxHold time.Duration
	// Batch is how many deltas one charge carries at most; 0 means
	// DefaultChargeBatch.
	Batch int
}

// ChargeStats counts what a ChargeBack did since it was created. Every
// count is of deltas: one bucket in one period.
type ChargeStats struct {
	// Held is the (bucket, period) pairs owed or sent and not yet applied
	// or dropped.
	Held int
	// Sent counts the deltas sent to the store, once each however often
	// their charge is retried.
	Sent uint64
	// Applied counts the deltas the store applied (or had applied: a retry
	// of a charge whose reply was lost).
	Applied uint64
	// Dropped counts the deltas given up, by reason, e.g.
	// Dropped[DropPeriodEnded].
	Dropped [numChargeDrops]uint64
}

// ChargeBack holds the spend a node admitted from its Fallback against
// limits with a period — quotas and window counters — and charges it to
// the shared store once the store is back, so that what the fallback
// admitted counts against what the rest of the period may admit (a token
// bucket's spend is not charged: its fallback share already bounds the
// rate, and a charge after recovery would only deny then).
//
// Charge adds units to the pair (bucket key, period) they were spent in;
// Flush sends every pair owed, Batch pairs a charge, each charge under a
// request id of its own (NewRequestID), through Store.Reconcile: the store
// applies a request id once, so a charge retried after a lost reply is not
// applied twice. A charge the store fails stays held, with its id, and is
// retried by the next Flush. Units spent after a Flush are owed anew and
// go in a later charge: each unit is sent in exactly one charge.
//
// A charge lands only in the period it was spent in: each delta carries
// its take's Limit (a quota's window, a window counter's WindowStart),
// and Flush drops (DropPeriodEnded, counted) a pair whose period has ended
// on Now's clock; the store's script likewise applies a delta whose period
// it has moved past to nothing (bucket.Delta), on the store's clock — a
// pair caught between the two clocks (their skew) is dropped there, not
// counted here: a quota's is counted by the store (Redis.PeriodMoved), a
// window counter's by none. A charge past the limit leaves the bucket in debt (a quota
// used beyond its Capacity), as any reconciliation does.
//
// It is safe for concurrent use. Create one with NewChargeBack; the zero
// ChargeBack is not usable.
type ChargeBack struct {
	o ChargeOptions

	mu      sync.Mutex
	owed    map[chargeKey]*Delta // spend not yet in a charge
	pending []*chargeSent        // charges sent (or to send) and not yet applied
	held    int                  // len(owed) + the deltas in pending

	flushMu sync.Mutex // one Flush at a time

	sent, applied atomic.Uint64
	dropped       [numChargeDrops]atomic.Uint64
}

// chargeKey names one bucket in one period: its key, and its limit's
// period (a quota's window, a window counter's window and length).
type chargeKey struct {
	key        string
	start, end int64 // WindowStart, WindowEnd, µs since the Unix epoch
	per        time.Duration
	algorithm  Algorithm
}

// chargeSent is one Reconcile sent, or to send, to the store.
type chargeSent struct {
	id     string
	deltas []Delta
	sent   bool      // its deltas were counted as Sent
	since  time.Time // the first failure that may have reached the store; zero: none
}

// NewChargeBack returns an empty ChargeBack configured by o. Errors: o.Store
// is nil.
func NewChargeBack(o ChargeOptions) (*ChargeBack, error) {
	if o.Store == nil {
		return nil, errors.New("bucket: charge back: Store is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = 100000
	}
	if o.MaxHold <= 0 {
		o.MaxHold = 9 * time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = DefaultChargeBatch
	}
	return &ChargeBack{o: o, owed: make(map[chargeKey]*Delta)}, nil
}

// Charges reports whether a ChargeBack charges spend on l: a quota or a
// window counter, valid (Limit.Validate) and, for a window counter, naming
// its window (WindowStart set: a delta without one would land in the
// store's current window, not the one it was spent in).
func Charges(l Limit) bool {
	switch {
	case l.Validate() != nil:
		return false
	case l.IsQuota():
		return true
	case l.IsWindow():
		return !l.WindowStart.IsZero()
	}
	return false
}

// Charge adds d's units to what is owed on d's bucket in d's period, to be
// charged to the store by a later Flush, and reports whether it did. It
// does nothing (false) for units of 0, for a limit that Charges refuses,
// and when MaxHeld pairs are held and d's is not one of them (counted as
// DropFull).
func (c *ChargeBack) Charge(d Delta) bool {
	if d.Units == 0 || !Charges(d.Limit) {
		return false
	}
	k := chargeKey{key: d.Key, start: d.Limit.WindowStart.UnixMicro(), end: d.Limit.WindowEnd.UnixMicro(),
		per: d.Limit.Per, algorithm: d.Limit.Algorithm}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.owed[k]; ok {
		o.Units = saturatingAdd(o.Units, d.Units)
		o.Limit = d.Limit // the latest configuration of the limit
		return true
	}
	if c.held >= c.o.MaxHeld {
		c.dropped[DropFull].Add(1)
		return false
	}
	c.owed[k] = &Delta{Key: d.Key, Limit: d.Limit, Units: d.Units}
	c.held++
	return true
}

// saturatingAdd is a + b, held within the int64 range.
func saturatingAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return 1<<63 - 1
	case a < 0 && b < 0 && s >= 0:
		return -1 << 63
	}
	return s
}

// Owes reports whether anything is held: owed, or sent and not yet
// applied. Cheap: a caller polls it before deciding to Flush.
func (c *ChargeBack) Owes() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held > 0
}

// Flush charges the store what is held: the charges a previous Flush could
// not complete first (under their own request ids), then what is owed now,
// in charges of at most Batch deltas, each of one master's buckets when
// the store is a MasterRouter (a Guarded store with per-master breakers).
// A charge the store fails or its breaker rejects (ErrNotSent: a Guarded
// store lets a flush's charges through only closed breakers) stays held
// for the next Flush, and Flush goes on with the next one: on a Redis
// Cluster one master refusing writes, down, or with its breaker open
// holds back only the charges that reach it (adv42: they held back every
// charge behind them, healthy masters' included; redis21: a rejection
// stopped the round, the other masters' charges too). It stops early when
// ctx is done, and returns the first failure's error (wrapping the
// store's: ErrUnavailable from a Guarded store). Before each send it drops the deltas whose period
// has ended (DropPeriodEnded), and a charge retried for MaxHold since a
// failure that may have reached the store (DropExpired). A Guarded store
// leaves a charge's failure out of its breaker's counts (withBackground):
// a flush going past many failed charges opened it for every key
// (review20). ctx bounds the flush; a Guarded store bounds each call by
// its own timeout. Charges carry quota and window counts, sums that do not
// depend on the order they are applied in. Flushes run one at a time.
func (c *ChargeBack) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	// A Guarded store leaves the charges' failures out of its breaker's
	// counts: going past each failed charge, a flush would otherwise open
	// it for every key.
	ctx = withBackground(ctx)
	c.mu.Lock()
	owed := c.owed
	c.owed = make(map[chargeKey]*Delta)
	c.mu.Unlock()
	// Routed outside c.mu: MasterOf may wait for the client's first slot
	// map, and Charge, on a request's path, takes c.mu.
	charges := c.batch(owed)
	c.mu.Lock()
	c.pending = append(c.pending, charges...)
	c.mu.Unlock()
	var first error
	for i := 0; ; {
		c.mu.Lock()
		if i >= len(c.pending) {
			c.mu.Unlock()
			return first
		}
		ch := c.pending[i]
		now := c.o.Now()
		live := c.live(ch, now)
		if len(ch.deltas) == 0 {
			c.pending = slices.Delete(c.pending, i, i+1)
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		if !live {
			c.done(i, DropExpired)
			continue
		}
		if err := ctx.Err(); err != nil {
			return cmp.Or(first, fmt.Errorf("bucket: charge %q: %w", ch.id, err))
		}
		if !ch.sent {
			ch.sent = true
			c.sent.Add(uint64(len(ch.deltas)))
		}
		err := c.o.Store.Reconcile(ctx, ch.id, ch.deltas)
		switch {
		case err == nil:
			c.applied.Add(uint64(len(ch.deltas)))
			c.done(i, numChargeDrops)
		case errors.Is(err, ErrInvalid):
			c.done(i, DropRefused)
		default:
			if ch.since.IsZero() && MayHaveApplied(err) {
				ch.since = now
			}
			if first == nil {
				first = fmt.Errorf("bucket: charge %q: %w", ch.id, err)
			}
			// A rejection (ErrNotSent) holds only this charge: on a
			// Redis Cluster its master's breaker is open, and the next
			// charges may go to other masters (a charge holds one
			// master's buckets). With one breaker the next ones are
			// rejected too, at no cost.
			i++
		}
	}
}

// batch makes owed's deltas into new charges of at most Batch deltas,
// each charge the buckets of one master when the store is a MasterRouter
// (a Guarded store over a Redis Cluster: GuardOptions.MasterOf), so that a
// master whose breaker is open holds back only its own charges. A delta
// of 0 units is dropped from what is held. It takes c.mu for that count.
func (c *ChargeBack) batch(owed map[chargeKey]*Delta) []*chargeSent {
	if len(owed) == 0 {
		return nil
	}
	router, _ := c.o.Store.(MasterRouter)
	type routed struct {
		master string
		d      *Delta
	}
	all := make([]routed, 0, len(owed))
	zero := 0
	for _, d := range owed {
		if d.Units == 0 {
			zero++
			continue
		}
		r := routed{d: d}
		if router != nil {
			r.master = router.MasterOf(d.Key)
		}
		all = append(all, r)
	}
	if zero > 0 {
		c.mu.Lock()
		c.held -= zero
		c.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b routed) int { return cmp.Or(cmp.Compare(a.master, b.master), cmp.Compare(a.d.Key, b.d.Key)) })
	var out []*chargeSent
	var ch *chargeSent
	for k, r := range all {
		if ch == nil || len(ch.deltas) >= c.o.Batch || r.master != all[k-1].master {
			ch = &chargeSent{id: NewRequestID(c.o.Now()), deltas: make([]Delta, 0, min(c.o.Batch, len(all)-k))}
			out = append(out, ch)
		}
		ch.deltas = append(ch.deltas, *r.d)
	}
	return out
}

// live drops from ch the deltas whose period has ended at now (counted)
// and reports whether ch may still be sent: false once it has been retried
// for MaxHold since a failure that may have reached the store. c.mu is
// held.
func (c *ChargeBack) live(ch *chargeSent, now time.Time) bool {
	kept := ch.deltas[:0]
	for _, d := range ch.deltas {
		if periodEnded(d.Limit, now) {
			c.dropped[DropPeriodEnded].Add(1)
			c.held--
			continue
		}
		kept = append(kept, d)
	}
	ch.deltas = kept
	return ch.since.IsZero() || now.Sub(ch.since) < c.o.MaxHold
}

// done removes the pending charge at index i, counting its deltas as
// dropped for why (numChargeDrops: applied, counted by the caller). Only
// Flush, holding flushMu, removes pending charges, so i is still its index.
func (c *ChargeBack) done(i int, why ChargeDrop) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.pending[i]
	if why < numChargeDrops {
		c.dropped[why].Add(uint64(len(ch.deltas)))
	}
	c.held -= len(ch.deltas)
	c.pending = slices.Delete(c.pending, i, i+1)
}

// periodEnded reports whether the period of a delta on l has ended at now:
// a quota's at WindowEnd, a fixed window's one Per after WindowStart, a
// sliding window's two (its count weighs in the next window too).
func periodEnded(l Limit, now time.Time) bool {
	switch {
	case l.IsQuota():
		return !now.Before(l.WindowEnd)
	case l.Algorithm == SlidingWindow:
		return !now.Before(l.WindowStart.Add(2 * l.Per))
	case l.Algorithm == FixedWindow:
		return !now.Before(l.WindowStart.Add(l.Per))
	}
	return false
}

// Stats returns the counters. Safe to call at any time.
func (c *ChargeBack) Stats() ChargeStats {
	c.mu.Lock()
	s := ChargeStats{Held: c.held}
	c.mu.Unlock()
	s.Sent, s.Applied = c.sent.Load(), c.applied.Load()
	for i := range c.dropped {
		s.Dropped[i] = c.dropped[i].Load()
	}
	return s
}
