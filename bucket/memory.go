package bucket

import (
	"context"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryOptions configures NewMemory. The zero value is a usable default.
type MemoryOptions struct {
	// Now is the store's clock; nil means time.Now. Only the wall-clock
	// reading is used, at microsecond resolution; a clock that steps back
	// never refills a bucket.
	Now func() time.Time
	// Shards is the number of independently locked partitions of the key
	// space, rounded up to a power of two; 0 means 64.
	Shards int
	// SweepEvery is how often a background goroutine calls Sweep to forget
	// full buckets and expired request ids; 0 means one minute, a negative
	// value starts no goroutine (call Sweep yourself).
	SweepEvery time.Duration
	// DedupFor is how long Reconcile remembers a request id at least (and
	// at most twice as long); 0 means ten minutes.
	DedupFor time.Duration
	// VoidFor is how long a committed take's request id is remembered for
	// Void, and a Void's tombstone for a late take, at least (and at most
	// twice as long); 0 means DefaultVoidWindow.
	VoidFor time.Duration
	// MaxRequestIDs bounds the request ids remembered at once, separately
	// for Reconcile and for Void; 0 means 2^20. When the bound is reached
	// the oldest ids are forgotten early, so under that load a retry (a
	// Void) must come sooner than DedupFor (VoidFor).
	MaxRequestIDs int
}

// Memory is a Store that keeps every bucket in this process. It is safe for
// concurrent use. Keys are spread over shards by hash, each with its own
// mutex; a Take or Reconcile locks the shards of all its keys in ascending
// order (so two multi-key calls cannot deadlock), reads the clock once, and
// checks and commits under those locks, so each call is atomic.
//
// A bucket that has refilled to its capacity is the same as a missing one, so
// Memory forgets it: at once when a call leaves it full (its entry is then
// only a tombstone that keeps the key's slot until the next Sweep, so that a
// bucket refunded to full and taken again copies nothing), and otherwise in
// Sweep once the time it needs to refill (under the limit it was last used
// with) has passed. Memory therefore holds the state only of buckets that
// are below capacity. Likewise a quota with nothing used is forgotten at
// once, and any other in Sweep an hour after its window ends (as Redis
// expires it).
//
// Create one with NewMemory; the zero Memory is not usable. Close stops the
// background sweep.
type Memory struct {
	now      func() time.Time
	shards   []shard
	mask     uint64
	seed     maphash.Seed // of shardOf's hash, made at NewMemory
	dedupFor int64        // µs
	voidFor  int64        // µs
	maxIDs   int          // ids per shard per generation

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	periodMoved atomic.Uint64 // PeriodMoved
}

var (
	_ Store       = (*Memory)(nil)
	_ StatusTaker = (*Memory)(nil)
)

// shard is one lock's worth of buckets and request ids.
type shard struct {
	mu      sync.Mutex
	buckets map[string]*entry  // a pointer each: an entry found is written in place, not stored again
	ids     recentIDs          // request ids Reconcile applied
	marks   recentIDs          // take markers of request ids, for Void
	slots   map[string]holders // in-flight limits' holders, made on first use
	_       [64]byte           // keep neighbouring mutexes off one cache line
}

// entry is one bucket's state in the core's numbers: a token bucket's or,
// with quota set, a quota's.
type entry struct {
	level   float64 // token bucket: units
	updated int64   // token bucket: µs since the Unix epoch
	used    float64 // quota: units used in window, a whole number
	window  int64   // quota: start of the window used counts in, µs since the Unix epoch
	// dropAt is when Sweep may forget the entry, µs since the Unix epoch: a
	// token bucket's when level reaches capacity under the last limit used,
	// a quota's quotaMargin past the end of its window.
	dropAt int64
	quota  bool
	// win: a window counter's state (window.go): prev units in the window
	// before window, used (cur) in the window that starts at window.
	win  bool
	prev float64
	// gone: the bucket is full (a quota: nothing used), the same as a
	// missing one, and its state is not read. The entry is kept until
	// Sweep, so that a bucket refunded to full and taken again, as the
	// buckets of every admitted and reconciled request under a roomy limit
	// are, reuses its slot and key instead of copying the key anew.
	gone bool
}

// NewMemory returns a Memory configured by o. Unless o.SweepEvery is
// negative it starts a goroutine that Close stops.
func NewMemory(o MemoryOptions) *Memory {
	n := 64
	if o.Shards > 0 {
		n = 1
		for n < o.Shards {
			n <<= 1
		}
	}
	dedupFor := o.DedupFor
	if dedupFor <= 0 {
		dedupFor = 10 * time.Minute
	}
	voidFor := o.VoidFor
	if voidFor <= 0 {
		voidFor = DefaultVoidWindow
	}
	maxIDs := o.MaxRequestIDs
	if maxIDs <= 0 {
		maxIDs = 1 << 20
	}
	m := &Memory{
		now:      o.Now,
		shards:   make([]shard, n),
		mask:     uint64(n - 1),
		seed:     maphash.MakeSeed(),
		dedupFor: dedupFor.Microseconds(),
		voidFor:  voidFor.Microseconds(),
		maxIDs:   max(1, maxIDs/(2*n)), // two generations per shard
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if m.now == nil {
		m.now = time.Now
	}
	for i := range m.shards {
		m.shards[i].buckets = make(map[string]*entry)
	}
	every := o.SweepEvery
	if every == 0 {
		every = time.Minute
	}
	if every < 0 {
		close(m.done)
		return m
	}
	go m.sweepLoop(every)
	return m
}

// Close stops the background sweep and waits for it to end. The Memory stays
// usable afterwards, without automatic sweeping. Close is idempotent and
// always returns nil.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() { close(m.stop) })
	<-m.done
	return nil
}

// Take implements Store. Items must have valid limits, costs >= 0 and
// distinct keys; otherwise Take changes nothing and returns an error wrapping
// ErrInvalid. It also fails, changing nothing, when ctx is already done, and
// with ErrVoided when requestID was voided (for VoidFor). A committed take
// with a requestID is remembered for VoidFor. On error the Decision is the
// zero value.
func (m *Memory) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	return m.TakeInto(ctx, requestID, items, nil)
}

// TakeInto implements StatusTaker: Take, with the Decision's Buckets in
// statuses when it can hold them, so that a take allocates nothing.
func (m *Memory) TakeInto(ctx context.Context, requestID string, items []Item, statuses []Status) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, &StoreError{Op: "take", Err: err}
	}
	if err := validateItems(items); err != nil {
		return Decision{}, err
	}
	if err := validateHolders(requestID, items); err != nil {
		return Decision{}, err
	}
	d := Decision{Allowed: true, DeniedBy: -1, Buckets: buf(statuses, len(items))}
	clear(d.Buckets)
	if len(items) == 0 {
		return d, nil
	}

	var (
		seenBuf  [8]checked
		shardBuf [8]uint32
		lockBuf  [9]uint32
	)
	seen := buf(seenBuf[:], len(items))
	idx := buf(shardBuf[:], len(items))
	for i := range items {
		idx[i] = m.shardOf(items[i].Key)
	}
	locks := append(lockBuf[:0], idx...)
	var marks *recentIDs // requestID's shard's, when there is one
	if requestID != "" {
		idShard := m.shardOf(requestID)
		locks = append(locks, idShard)
		marks = &m.shards[idShard].marks
	}
	locks = sortedUnique(locks)
	m.lock(locks)
	defer m.unlock(locks)
	now := m.now().UnixMicro()
	var (
		markKey   idKey
		markInCur bool
	)
	if marks != nil {
		var mk mark
		markKey, mk, markInCur = marks.lookupForTake(requestID, now, m.voidFor)
		if takeMarked(mk) {
			return Decision{}, &StoreError{Op: "take", Subject: requestID, Err: ErrVoided}
		}
	}

	// Phase 1: refill every token bucket, roll every quota into its window,
	// and check each; write nothing.
	firstLarge, slowest := -1, -1
	var retry float64
	for i := range items {
		it := &items[i]
		e, at := m.shards[idx[i]].lookup(it.Key)
		found := at != nil
		var ok, tooLarge bool
		var short float64 // the wait, when short
		if it.Limit.Concurrent {
			live := m.shards[idx[i]].slots[it.Key].live(now)
			ok, tooLarge = checkSlots(live, float64(it.Limit.Capacity), float64(it.Cost))
			short = slotRetry
			seen[i] = checked{live: live}
		} else if it.Limit.IsQuota() {
			capacity, windowStart, windowEnd := it.Limit.window()
			used, window := 0.0, windowStart
			if found && !e.gone && e.quota {
				used, window = e.used, e.window
			}
			used, window, ok, tooLarge, short = checkQuotaAt(used, window, windowStart, windowEnd, capacity, now, float64(it.Cost))
			seen[i] = checked{used: used, window: window, dropAt: e.dropAt, at: at}
		} else if it.Limit.IsWindow() {
			var prev float64
			prev, seen[i], ok, tooLarge, short = m.checkWindow(e, at, *it, now)
			seen[i].level = prev
		} else {
			capacity, rate, per := it.Limit.floats()
			level, updated := capacity, now
			if found && !e.gone && !e.quota && !e.win {
				level, updated = e.level, e.updated
			}
			level, updated, ok, tooLarge, short = checkAt(level, updated, capacity, rate, per, now, float64(it.Cost))
			seen[i] = checked{level: level, updated: updated, at: at}
		}
		switch {
		case tooLarge:
			if firstLarge < 0 {
				firstLarge = i
			}
		case !ok:
			// The denier is the short bucket whose wait is the
			// request's (the longest; the first among equals), so that
			// the limit a 429 names is the one it waits for.
			if slowest < 0 || short > retry {
				slowest, retry = i, short
			}
		}
	}

	d.Windows = windowsOf(items, seen)
	if firstLarge >= 0 || slowest >= 0 {
		d.Allowed = false
		if firstLarge >= 0 {
			d.DeniedBy, d.TooLarge = firstLarge, true
		} else {
			d.DeniedBy, d.RetryAfter = slowest, micros(retry)
		}
		for i, it := range items {
			d.Buckets[i] = seen[i].status(it.Limit, now)
		}
		return d, nil
	}

	// Phase 2: every bucket can pay; commit every cost.
	if marks != nil { // under the same lock and now as its lookup
		marks.record(markKey, markTaken, markInCur, now, m.maxIDs)
	}
	for i := range items {
		it := &items[i]
		sh := &m.shards[idx[i]]
		if it.Limit.Concurrent {
			live := seen[i].live
			if it.Cost > 0 {
				sh.hold(it.Key, requestID, now+it.Limit.slotLease(), now)
				live++
			}
			d.Buckets[i] = slotStatus(live, float64(it.Limit.Capacity))
			continue
		}
		if it.Limit.IsQuota() {
			capacity, windowStart, windowEnd := it.Limit.window()
			used := charge(seen[i].used, float64(it.Cost))
			sh.putQuota(it.Key, seen[i].at, used, seen[i].window, windowStart, windowEnd, now, seen[i].dropAt)
			d.Buckets[i] = quotaStatus(used, capacity, windowEnd, now)
			continue
		}
		if it.Limit.IsWindow() {
			capacity, per, _, sliding := it.Limit.windowed()
			c := seen[i]
			used := charge(c.used, float64(it.Cost))
			sh.putWindow(it.Key, c.at, c.level, used, c.window, per, now, sliding)
			d.Buckets[i] = windowStatus(c.level, used, c.window, per, capacity, now, sliding)
			continue
		}
		capacity, rate, per := it.Limit.floats()
		level, reset := pay(seen[i].level, capacity, rate, per, float64(it.Cost))
		sh.put(it.Key, seen[i].at, level, seen[i].updated, capacity, reset)
		d.Buckets[i] = Status{Remaining: floorUnits(level), Reset: micros(reset)}
	}
	return d, nil
}

// checked is what phase 1 learnt about one item's bucket: a token bucket's
// refilled state, or a quota's rolled state and when its entry drops, or a
// window counter's slid state (prev in level, cur in used, its window's
// start in window).
type checked struct {
	level   float64
	updated int64
	used    float64
	window  int64
	dropAt  int64
	live    float64 // in-flight limit: live holders
	at      *entry  // the bucket's entry, live or gone; nil when it has none
}

// status is the Status of the state phase 1 saw for a bucket under l.
func (c checked) status(l Limit, now int64) Status {
	if l.Concurrent {
		return slotStatus(c.live, float64(l.Capacity))
	}
	if l.IsQuota() {
		capacity, _, windowEnd := l.window()
		return quotaStatus(c.used, capacity, windowEnd, now)
	}
	if l.IsWindow() {
		capacity, per, _, sliding := l.windowed()
		return windowStatus(c.level, c.used, c.window, per, capacity, now, sliding)
	}
	capacity, rate, per := l.floats()
	return status(c.level, capacity, rate, per)
}

// Reconcile implements Store. The deltas apply in order under one set of
// locks, after the request id is recorded; a request id seen in the last
// DedupFor makes the call a no-op. An empty requestID is never recorded, so
// such deltas apply on every call. Deltas with an invalid limit fail the
// whole call, changing nothing, with an error wrapping ErrInvalid; a ctx
// already done fails it too.
func (m *Memory) Reconcile(ctx context.Context, requestID string, deltas []Delta) error {
	if err := ctx.Err(); err != nil {
		return &StoreError{Op: "reconcile", Subject: requestID, Err: err}
	}
	if err := validateDeltas(requestID, deltas); err != nil {
		return err
	}
	if len(deltas) == 0 {
		return nil
	}

	var (
		shardBuf [8]uint32
		lockBuf  [9]uint32
	)
	idx := buf(shardBuf[:], len(deltas))
	for i := range deltas {
		idx[i] = m.shardOf(deltas[i].Key)
	}
	locks := append(lockBuf[:0], idx...)
	idShard := m.shardOf(requestID)
	if requestID != "" {
		locks = append(locks, idShard)
	}
	locks = sortedUnique(locks)
	m.lock(locks)
	defer m.unlock(locks)
	now := m.now().UnixMicro()

	if requestID != "" && m.shards[idShard].ids.seen(requestID, now, m.dedupFor, m.maxIDs) {
		return nil
	}
	if m.applyDeltas(requestID, idx, deltas, now) {
		m.periodMoved.Add(1)
	}
	return nil
}

// Void implements Store. requestID must not be empty, and items must be
// valid as a Take's; otherwise Void changes nothing and returns an error
// wrapping ErrInvalid. When requestID's take was committed within VoidFor,
// its items' costs are refunded; otherwise requestID is remembered as voided
// for VoidFor, so that its take applies nothing. A second Void is a no-op.
// A ctx already done fails it, changing nothing.
func (m *Memory) Void(ctx context.Context, requestID string, items []Item) error {
	if err := ctx.Err(); err != nil {
		return &StoreError{Op: "void", Subject: requestID, Err: err}
	}
	if err := validateVoid(requestID, items); err != nil {
		return err
	}
	var (
		shardBuf [8]uint32
		lockBuf  [9]uint32
	)
	idx := buf(shardBuf[:], len(items))
	for i := range items {
		idx[i] = m.shardOf(items[i].Key)
	}
	idShard := m.shardOf(requestID)
	locks := sortedUnique(append(append(lockBuf[:0], idx...), idShard))
	m.lock(locks)
	defer m.unlock(locks)
	now := m.now().UnixMicro()

	marks := &m.shards[idShard].marks
	k, mk, inCur := marks.lookup(requestID, now, m.voidFor)
	next, refund := voidMark(mk)
	marks.record(k, next, inCur, now, m.maxIDs)
	if refund && m.applyDeltas(requestID, idx, refunds(items), now) {
		m.periodMoved.Add(1)
	}
	return nil
}

// PeriodMoved returns how many reconciliations (Reconcile or Void calls)
// m applied since it was made with at least one quota delta that applied
// to nothing, because m already held a later window of that quota than the
// delta's (the period moved on; Delta), as Redis.PeriodMoved counts them.
// Safe for concurrent use.
func (m *Memory) PeriodMoved() uint64 { return m.periodMoved.Load() }

// applyDeltas applies deltas, whose shards are idx and locked, at now; a
// negative delta on an in-flight limit releases requestID's slot. It
// returns true when a quota's delta (of units not 0) applied to nothing:
// its stored window later than the delta's (PeriodMoved).
func (m *Memory) applyDeltas(requestID string, idx []uint32, deltas []Delta, now int64) (moved bool) {
	for i := range deltas {
		dl := &deltas[i]
		sh := &m.shards[idx[i]]
		if dl.Limit.Concurrent {
			if dl.Units < 0 {
				sh.release(dl.Key, requestID)
			}
			continue
		}
		e, at := sh.lookup(dl.Key)
		found := at != nil
		if dl.Limit.IsQuota() {
			_, windowStart, windowEnd := dl.Limit.window()
			used, window := 0.0, windowStart
			if found && !e.gone && e.quota {
				used, window = e.used, e.window
			}
			used, window, applied := applyQuota(used, window, windowStart, windowEnd, float64(dl.Units))
			if applied {
				sh.putQuota(dl.Key, at, used, window, windowStart, windowEnd, now, e.dropAt)
			} else if dl.Units != 0 {
				moved = true
			}
			continue
		}
		if dl.Limit.IsWindow() {
			_, per, taken, sliding := dl.Limit.windowed()
			prev, cur, start := 0.0, 0.0, int64(-1)
			if found && !e.gone && e.win {
				prev, cur, start = e.prev, e.used, e.window
			}
			prev, cur, start, applied := applyWindow(prev, cur, start, per, now, taken, float64(dl.Units), sliding)
			if applied {
				sh.putWindow(dl.Key, at, prev, cur, start, per, now, sliding)
			}
			continue
		}
		capacity, rate, per := dl.Limit.floats()
		level, updated := capacity, now
		if found && !e.gone && !e.quota && !e.win {
			level, updated = e.level, e.updated
		}
		level, updated = apply(level, updated, capacity, rate, per, now, float64(dl.Units))
		sh.put(dl.Key, at, level, updated, capacity, wait(level, capacity, rate, per))
	}
	return moved
}

// lookup returns key's entry (the zero entry when it has none) and where
// it is held, for a write in place under the same lock (store); at is nil
// when the key has no entry.
func (s *shard) lookup(key string) (e entry, at *entry) {
	at = s.buckets[key]
	if at != nil {
		e = *at
	}
	return e, at
}

// store writes e as key's entry: in place at at, the entry lookup found
// under the same lock, or as a new entry when at is nil (the key copied:
// the caller's may alias a larger buffer).
func (s *shard) store(key string, at *entry, e entry) {
	if at != nil {
		*at = e
		return
	}
	n := new(entry) // e itself stays on the caller's stack
	*n = e
	s.buckets[strings.Clone(key)] = n
}

// put stores a bucket's new state, or marks it gone when full (a full bucket
// and a missing one are the same; Sweep drops it). at: the key's entry,
// live or gone, as lookup found it; nil when it has none. reset is the µs
// until it is full.
func (s *shard) put(key string, at *entry, level float64, updated int64, capacity, reset float64) {
	if level >= capacity {
		if at != nil {
			*at = entry{gone: true, dropAt: updated}
		}
		return
	}
	s.store(key, at, entry{level: level, updated: updated, dropAt: updated + int64(reset)})
}

// putQuota stores a quota's new state, or marks it gone when nothing is used
// (the same as a missing quota; Sweep drops it). at: the key's entry, live
// or gone, as lookup found it; nil when it has none. A state of the item's own window is dropped
// quotaMargin after the window ends; a later window's (a lagging caller's
// take counted in it) keeps the dropAt it had, as take.lua keeps the TTL.
func (s *shard) putQuota(key string, at *entry, used float64, window, windowStart, windowEnd, now, dropAt int64) {
	if used <= 0 {
		if at != nil {
			*at = entry{gone: true, dropAt: now}
		}
		return
	}
	if window == windowStart {
		dropAt = now + int64(quotaExpiry(windowEnd, now))
	}
	s.store(key, at, entry{used: used, window: window, dropAt: dropAt, quota: true})
}

// windowsOf is Decision.Windows for items whose phase 1 saw seen: nil
// when no item is a window counter.
func windowsOf(items []Item, seen []checked) []time.Time {
	var w []time.Time
	for i := range items {
		if !items[i].Limit.IsWindow() {
			continue
		}
		if w == nil {
			w = make([]time.Time, len(items))
		}
		w[i] = time.UnixMicro(seen[i].window).UTC()
	}
	return w
}

// checkWindow is phase one of a take from a window counter whose entry is
// e (at: where it is held, nil when the key has none): its slid state (prev returned apart, cur in
// used, start in window) and the verdict, as checkWindowAt reports it.
func (m *Memory) checkWindow(e entry, at *entry, it Item, now int64) (float64, checked, bool, bool, float64) {
	capacity, per, _, sliding := it.Limit.windowed()
	prev, cur, start := 0.0, 0.0, int64(-1)
	if at != nil && !e.gone && e.win {
		prev, cur, start = e.prev, e.used, e.window
	}
	prev, cur, start, ok, tooLarge, short := checkWindowAt(prev, cur, start, per, capacity, now, float64(it.Cost), sliding)
	return prev, checked{used: cur, window: start, at: at}, ok, tooLarge, short
}

// putWindow stores a window counter's new state, or marks it gone when it
// counts nothing (the same as a missing counter; Sweep drops it). at: the
// key's entry, live or gone, as lookup found it; nil when it has none. It is dropped when nothing it counts
// weighs any more (windowExpiry).
func (s *shard) putWindow(key string, at *entry, prev, cur float64, start, per, now int64, sliding bool) {
	if prev <= 0 && cur <= 0 {
		if at != nil {
			*at = entry{gone: true, dropAt: now}
		}
		return
	}
	s.store(key, at, entry{prev: prev, used: cur, window: start, dropAt: now + int64(windowExpiry(start, per, now, sliding)), win: true})
}

// Sweep forgets every bucket that has refilled to capacity by now (under the
// limit it was last used with), every quota an hour past the end of its
// window, the tombstones of buckets left full, and request ids older than
// the dedup window (take markers older than the void window), and returns
// the number of buckets it dropped (tombstones not counted). The background
// goroutine calls it every SweepEvery; callers may call it at any time. It
// locks one shard at a time.
func (m *Memory) Sweep() int {
	dropped := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		now := m.now().UnixMicro()
		for k, e := range sh.buckets {
			if e.dropAt <= now {
				delete(sh.buckets, k)
				if !e.gone { // a tombstone is no bucket
					dropped++
				}
			}
		}
		sh.sweepSlots(now)
		sh.ids.expire(now, m.dedupFor)
		sh.marks.expire(now, m.voidFor)
		sh.mu.Unlock()
	}
	return dropped
}

func (m *Memory) sweepLoop(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Sweep()
		}
	}
}

// shardOf returns the shard of key (a bucket key or a request id). The
// hash is the runtime's own (hash/maphash, AES-based where the processor
// has AES), seeded once per Memory: shards are this process's alone, so it
// need not be stable across processes, and it costs about half of
// xxhash.Sum64String on keys of 24 to 40 bytes (callgrind: some 58 against
// 122 instructions a key with the loop around them), seven keys a request.
func (m *Memory) shardOf(key string) uint32 {
	return uint32(maphash.String(m.seed, key) & m.mask)
}

// lock locks shards in the order given, which must be ascending: every caller
// locking in one global order is what rules out deadlock.
func (m *Memory) lock(shards []uint32) {
	for _, i := range shards {
		m.shards[i].mu.Lock()
	}
}

func (m *Memory) unlock(shards []uint32) {
	for j := len(shards) - 1; j >= 0; j-- {
		m.shards[shards[j]].mu.Unlock()
	}
}

// sortedUnique sorts s ascending in place and returns it without repeats.
// Shards below 64 (every shard of the default 64) are sorted by their
// bits in one word, read back lowest first: about 80 instructions for a
// request's four or five, where the insertion sort below costs about 120
// (perf30, issue #13, callgrind). Any other s is insertion-sorted (s is a
// request's handful of shards).
func sortedUnique(s []uint32) []uint32 {
	var set uint64
	for _, v := range s {
		if v >= 64 {
			return insertionUnique(s)
		}
		set |= 1 << v
	}
	out := s[:0] // every value is in set: s may be overwritten
	for ; set != 0; set &= set - 1 {
		out = append(out, uint32(bits.TrailingZeros64(set)))
	}
	return out
}

// insertionUnique is sortedUnique by insertion sort, for any values.
func insertionUnique(s []uint32) []uint32 {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// buf returns n elements of stack, or of a fresh slice when stack is short.
func buf[T any](stack []T, n int) []T {
	if n <= len(stack) {
		return stack[:n]
	}
	return make([]T, n)
}
