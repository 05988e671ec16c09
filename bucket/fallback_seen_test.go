package bucket_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// seenClock is a settable clock for a Fallback's memory.
type seenClock struct{ t time.Time }

func (c *seenClock) now() time.Time { return c.t }

// seenStep is one step of a TestFallbackSeeded timeline: a reading the
// store reported (observe), or a fallback take expected to pass or not.
type seenStep struct {
	name     string
	at       time.Time // the fallback's clock for the step; zero: unchanged
	key      string
	limit    bucket.Limit
	observe  bool
	left     int64     // observe: the shared Remaining reported
	readAt   time.Time // observe: the store's instant of the reading (its Reset is of it); zero: the step's clock
	prevOnly bool      // observe, a sliding window: only its previous window counts (Reset until its window's end)
	window   time.Time // observe, a window counter: the store's window start
	cached   bool      // observe: as a cached denial of another item
	ownDeny  bool      // observe: as a cached denial by this item, its status left
	delta    int64     // observe: a reconciliation of the node's (ObserveDelta), not a reading
	cost     int64     // take
	allowed  bool      // take: expected verdict
	wantLeft *int64    // take: the Remaining expected, when set
}

func runSeen(t *testing.T, f *bucket.Fallback, clock *seenClock, steps []seenStep) {
	t.Helper()
	for i, s := range steps {
		if !s.at.IsZero() {
			clock.t = s.at
		}
		it := bucket.Item{Key: s.key, Limit: s.limit, Cost: s.cost}
		if s.observe {
			readAt := s.readAt
			if readAt.IsZero() {
				readAt = clock.t
			}
			st := bucket.Status{Remaining: s.left, Reset: seenReset(s.limit, s.window, readAt, s.left)}
			if s.prevOnly {
				st.Reset = s.window.Add(s.limit.Per).Sub(readAt)
			}
			d := bucket.Decision{Allowed: true, DeniedBy: -1, Buckets: []bucket.Status{st}}
			if !s.window.IsZero() {
				d.Windows = []time.Time{s.window}
			}
			if s.delta != 0 {
				l := s.limit
				if !s.window.IsZero() {
					l.WindowStart = s.window // a window counter's take's window, as the meter sends it
				}
				f.ObserveDelta(bucket.Delta{Key: s.key, Limit: l, Units: s.delta})
				continue
			}
			items := []bucket.Item{it}
			if s.ownDeny {
				d = bucket.Decision{DeniedBy: 0, Cached: true, RetryAfter: time.Second, Buckets: []bucket.Status{st}}
			}
			if s.cached {
				other := bucket.Item{Key: s.key + "-other", Limit: bucket.Limit{Capacity: 1, Rate: 1, Per: time.Second}}
				items = append(items, other)
				d = bucket.Decision{DeniedBy: 1, Cached: true, Buckets: []bucket.Status{{}, {}}}
			}
			f.ObserveLevels(items, d)
			continue
		}
		d, err := f.Take(context.Background(), "", []bucket.Item{it})
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.name, err)
		}
		if d.Allowed != s.allowed {
			t.Errorf("step %d (%s): take %d of %s: allowed %v, want %v (remaining %d)",
				i, s.name, s.cost, s.key, d.Allowed, s.allowed, d.Buckets[0].Remaining)
		}
		if s.wantLeft != nil && d.Buckets[0].Remaining != *s.wantLeft {
			t.Errorf("step %d (%s): remaining %d, want %d", i, s.name, d.Buckets[0].Remaining, *s.wantLeft)
		}
	}
}

// seenReset is the Reset a store reports, read at at, for a quota or
// window counter l (window: a window counter's start) with left units
// left: until the quota's or fixed window's end; a sliding window's, when
// anything is left counted, until its next window's end (its current
// window holds some), else 0 (empty).
func seenReset(l bucket.Limit, window, at time.Time, left int64) time.Duration {
	switch {
	case l.IsQuota():
		return max(l.WindowEnd.Sub(at), 0)
	case l.Algorithm == bucket.FixedWindow:
		return window.Add(l.Per).Sub(at)
	case left < l.Capacity:
		return window.Add(2 * l.Per).Sub(at)
	}
	return 0
}

// TestFallbackSeeded walks the fallback of 3 nodes through readings of a
// 5,000-unit day quota (share 1,666) and a 300-unit minute window (share
// 100): a fresh reading of the same period starts the node's bucket at
// min(share, remaining / 3), a spent quota at nothing; a new period, a key
// never read, a changed limit, a cached denial's other items and a
// reading of a key the node used more of since still lowers it only.
func TestFallbackSeeded(t *testing.T) {
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	next := day.Add(24 * time.Hour)
	q := bucket.Quota(5000, day, next)
	q2 := bucket.Quota(5000, next, next.Add(24*time.Hour))
	qBig := bucket.Quota(6000, day, next)
	minute := day.Add(17 * time.Hour) // a window start: minutes are aligned on the epoch
	w := bucket.Window(bucket.FixedWindow, 300, time.Minute)
	sw := bucket.Window(bucket.SlidingWindow, 300, time.Minute)
	noon := day.Add(12 * time.Hour)
	zero := int64(0)
	for _, tc := range []struct {
		name  string
		steps []seenStep
	}{
		{name: "near spent: a third of what was left", steps: []seenStep{
			{name: "read 150 left", at: noon, key: "a", limit: q, observe: true, left: 150},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "50 fits", key: "a", limit: q, cost: 50, allowed: true},
			{name: "then nothing", key: "a", limit: q, cost: 1},
		}},
		{name: "spent: nothing, not one unit", steps: []seenStep{
			{name: "read 0 left", at: noon, key: "a", limit: q, observe: true, left: 0},
			{name: "1 is denied", key: "a", limit: q, cost: 1},
		}},
		{name: "in debt: nothing", steps: []seenStep{
			{name: "read -40", at: noon, key: "a", limit: q, observe: true, left: -40},
			{name: "1 is denied, 0 left (the share used, no more)", key: "a", limit: q, cost: 1, wantLeft: &zero},
		}},
		{name: "a lot left: the share at most", steps: []seenStep{
			{name: "read 4,999 left", at: noon, key: "a", limit: q, observe: true, left: 4999},
			{name: "the share fits", key: "a", limit: q, cost: 1666, allowed: true},
			{name: "then nothing", key: "a", limit: q, cost: 1},
		}},
		{name: "latest reading wins", steps: []seenStep{
			{name: "read 0", at: noon, key: "a", limit: q, observe: true, left: 0},
			{name: "read 300 a second later (a refund between)", key: "a", limit: q, observe: true, left: 300, readAt: noon.Add(time.Second)},
			{name: "100 fits", key: "a", limit: q, cost: 100, allowed: true},
			{name: "then nothing", key: "a", limit: q, cost: 1},
		}},
		{name: "new period: the full share", steps: []seenStep{
			{name: "read 0 yesterday", at: noon, key: "a", limit: q, observe: true, left: 0},
			{name: "today the share fits", at: next.Add(time.Hour), key: "a", limit: q2, cost: 1666, allowed: true},
		}},
		{name: "never read: the full share", steps: []seenStep{
			{name: "read 0 of another key", at: noon, key: "b", limit: q, observe: true, left: 0},
			{name: "the share fits", key: "a", limit: q, cost: 1666, allowed: true},
			{name: "then nothing", key: "a", limit: q, cost: 1},
		}},
		{name: "limit changed: the full share", steps: []seenStep{
			{name: "read 0 under 5,000", at: noon, key: "a", limit: q, observe: true, left: 0},
			{name: "the share of 6,000 fits", key: "a", limit: qBig, cost: 2000, allowed: true},
		}},
		{name: "a cached denial of another item: not a reading", steps: []seenStep{
			{name: "cached", at: noon, key: "a", limit: q, observe: true, cached: true},
			{name: "the share fits", key: "a", limit: q, cost: 1666, allowed: true},
		}},
		{name: "a cached denial repeats an older reading: not taken again", steps: []seenStep{
			{name: "read 300 left (a denial)", at: noon, key: "a", limit: q, observe: true, left: 300},
			{name: "read 150 left (a later take)", key: "a", limit: q, observe: true, left: 150},
			{name: "the cached denial's 300", key: "a", limit: q, observe: true, ownDeny: true, left: 300},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "50 fits", key: "a", limit: q, cost: 50, allowed: true},
		}},
		{name: "two takes observed out of order: the older reading is dropped", steps: []seenStep{
			{name: "read 150 left by the later take", at: noon, key: "a", limit: q, observe: true, left: 150, readAt: noon.Add(2 * time.Second)},
			{name: "read 300 left by the earlier take, observed last", key: "a", limit: q, observe: true, left: 300, readAt: noon.Add(time.Second)},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "50 fits", key: "a", limit: q, cost: 50, allowed: true},
		}},
		{name: "two takes of one call (one instant): the lower reading stays", steps: []seenStep{
			{name: "read 150 left by the call's later take", at: noon, key: "a", limit: q, observe: true, left: 150},
			{name: "read 300 left by its earlier take, observed last", key: "a", limit: q, observe: true, left: 300},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "50 fits", key: "a", limit: q, cost: 50, allowed: true},
		}},
		{name: "window counter: two takes observed out of order", steps: []seenStep{
			{name: "read 30 left 20 s in", at: minute.Add(30 * time.Second), key: "w", limit: w, observe: true, left: 30, window: minute, readAt: minute.Add(20 * time.Second)},
			{name: "read 90 left 10 s in, observed last", key: "w", limit: w, observe: true, left: 90, window: minute, readAt: minute.Add(10 * time.Second)},
			{name: "11 is over 30/3", key: "w", limit: w, cost: 11},
			{name: "10 fits", key: "w", limit: w, cost: 10, allowed: true},
		}},
		{name: "sliding window: an older reading of it empty is dropped", steps: []seenStep{
			{name: "read 150 left 30 s in", at: minute.Add(30 * time.Second), key: "s", limit: sw, observe: true, left: 150, window: minute},
			{name: "read it empty (300 left, Reset 0) 5 s in, observed last", key: "s", limit: sw, observe: true, left: 300, window: minute, readAt: minute.Add(5 * time.Second)},
			{name: "51 is over 150/3", key: "s", limit: sw, cost: 51},
			{name: "50 fits", key: "s", limit: sw, cost: 50, allowed: true},
		}},
		{name: "sliding window: a reading with only the previous window counted, then a later one", steps: []seenStep{
			{name: "read 30 left 10 s in", at: minute.Add(10 * time.Second), key: "s", limit: sw, observe: true, left: 30, window: minute},
			{name: "the next window, 40 s in: 240 left, Reset 20 s (only the window before counts)", at: minute.Add(100 * time.Second), key: "s", limit: sw, observe: true, left: 240, window: minute.Add(time.Minute), prevOnly: true},
			{name: "50 s in: 150 left (this window counts too)", at: minute.Add(110 * time.Second), key: "s", limit: sw, observe: true, left: 150, window: minute.Add(time.Minute)},
			{name: "51 is over 150/3", key: "s", limit: sw, cost: 51},
			{name: "50 fits", key: "s", limit: sw, cost: 50, allowed: true},
		}},
		{name: "a refund of the node's after its reading raises it", steps: []seenStep{
			{name: "read 150 left", at: noon, key: "a", limit: q, observe: true, left: 150},
			{name: "the take settled 150 under its reservation", key: "a", limit: q, observe: true, delta: -150},
			{name: "101 is over 300/3", key: "a", limit: q, cost: 101},
			{name: "100 fits", key: "a", limit: q, cost: 100, allowed: true},
		}},
		{name: "a charge of the node's after its reading lowers it", steps: []seenStep{
			{name: "read 300 left", at: noon, key: "a", limit: q, observe: true, left: 300},
			{name: "the take settled 150 over its reservation", key: "a", limit: q, observe: true, delta: 150},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "50 fits", key: "a", limit: q, cost: 50, allowed: true},
		}},
		{name: "a delta of another period or limit, or with no reading, moves nothing", steps: []seenStep{
			{name: "read 150 left", at: noon, key: "a", limit: q, observe: true, left: 150},
			{name: "a refund of tomorrow's quota", key: "a", limit: q2, observe: true, delta: -3000},
			{name: "a refund under 6,000", key: "a", limit: qBig, observe: true, delta: -3000},
			{name: "a refund of a key never read", key: "b", limit: q, observe: true, delta: -3000},
			{name: "51 is over 150/3", key: "a", limit: q, cost: 51},
			{name: "b: the full share", key: "b", limit: q, cost: 1666, allowed: true},
		}},
		{name: "window counter: a refund in the reading's window", steps: []seenStep{
			{name: "read 30 left", at: minute.Add(10 * time.Second), key: "w", limit: w, observe: true, left: 30, window: minute},
			{name: "a refund of the minute before", key: "w", limit: w, observe: true, delta: -90, window: minute.Add(-time.Minute)},
			{name: "a refund of this minute", key: "w", limit: w, observe: true, delta: -30, window: minute},
			{name: "21 is over 60/3", key: "w", limit: w, cost: 21},
			{name: "20 fits", key: "w", limit: w, cost: 20, allowed: true},
		}},
		{name: "not much left: its third", steps: []seenStep{
			{name: "read 4,900 left", at: noon, key: "a", limit: q, observe: true, left: 4900},
			{name: "1,634 is over 4,900/3", key: "a", limit: q, cost: 1634},
			{name: "1,633 fits", key: "a", limit: q, cost: 1633, allowed: true},
		}},
		{name: "seeds the used, never lowers it", steps: []seenStep{
			{name: "1,600 spent in an outage", at: noon, key: "a", limit: q, cost: 1600, allowed: true},
			{name: "read 4,000 left", key: "a", limit: q, observe: true, left: 4000},
			{name: "66 left of the share, not 1,333", key: "a", limit: q, cost: 67},
			{name: "66 fits", key: "a", limit: q, cost: 66, allowed: true},
		}},
		{name: "window counter, same window", steps: []seenStep{
			{name: "read 30 left", at: minute.Add(10 * time.Second), key: "w", limit: w, observe: true, left: 30, window: minute},
			{name: "11 is over 30/3", key: "w", limit: w, cost: 11},
			{name: "10 fits", key: "w", limit: w, cost: 10, allowed: true},
			{name: "then nothing", key: "w", limit: w, cost: 1},
			{name: "the next window: the full share", at: minute.Add(time.Minute), key: "w", limit: w, cost: 100, allowed: true},
		}},
		{name: "window counter, read in the window before", steps: []seenStep{
			{name: "read 0 left", at: minute.Add(50 * time.Second), key: "w", limit: w, observe: true, left: 0, window: minute},
			{name: "a minute on: the full share", at: minute.Add(70 * time.Second), key: "w", limit: w, cost: 100, allowed: true},
		}},
		{name: "sliding window: the weighted count", steps: []seenStep{
			{name: "read 0 left", at: minute.Add(10 * time.Second), key: "s", limit: sw, observe: true, left: 0, window: minute},
			{name: "1 is denied", key: "s", limit: sw, cost: 1},
		}},
		{name: "sliding window: the previous window's weight counts", steps: []seenStep{
			{name: "90 in the window before", at: minute.Add(-50 * time.Second), key: "s", limit: sw, cost: 90, allowed: true},
			{name: "read 150 left, half a window on", at: minute.Add(30 * time.Second), key: "s", limit: sw, observe: true, left: 150, window: minute},
			{name: "50 fits: 45 weigh of the 90", key: "s", limit: sw, cost: 50, allowed: true},
			{name: "then nothing", key: "s", limit: sw, cost: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &seenClock{t: day}
			f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 3, Memory: bucket.MemoryOptions{Now: clock.now, SweepEvery: -1}})
			defer f.Close()
			runSeen(t, f, clock, tc.steps)
		})
	}
}

// TestFallbackSeenEvicted: a reading the bounded LRU (MaxSeen) forgot
// seeds nothing, so the key's fallback starts with the full share, while
// a recent one still seeds.
func TestFallbackSeenEvicted(t *testing.T) {
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	q := bucket.Quota(5000, day, day.Add(24*time.Hour))
	clock := &seenClock{t: day.Add(time.Hour)}
	f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 3, MaxSeen: 16, Memory: bucket.MemoryOptions{Now: clock.now, SweepEvery: -1}})
	defer f.Close()
	spent := bucket.Decision{Allowed: true, DeniedBy: -1, Buckets: []bucket.Status{{Remaining: 0}}}
	f.ObserveLevels([]bucket.Item{{Key: "old", Limit: q}}, spent)
	for i := range 1000 { // bounded: far more keys than MaxSeen
		f.ObserveLevels([]bucket.Item{{Key: fmt.Sprintf("k%d", i), Limit: q}}, spent)
	}
	d, err := f.Take(context.Background(), "", []bucket.Item{{Key: "old", Limit: q, Cost: 1666}})
	if err != nil || !d.Allowed {
		t.Errorf("evicted key: take of the full share: %+v, %v; want allowed", d, err)
	}
	d, err = f.Take(context.Background(), "", []bucket.Item{{Key: "k999", Limit: q, Cost: 1}})
	if err != nil || d.Allowed {
		t.Errorf("recent key read spent: take of 1: %+v, %v; want denied", d, err)
	}
}

// TestFallbackHeldDoesNotSeed: Held reports what the node's bucket holds
// without seeding it from a fresh reading; the next take does seed it.
func TestFallbackHeldDoesNotSeed(t *testing.T) {
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	q := bucket.Quota(5000, day, day.Add(24*time.Hour))
	clock := &seenClock{t: day.Add(time.Hour)}
	f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 3, Memory: bucket.MemoryOptions{Now: clock.now, SweepEvery: -1}})
	defer f.Close()
	f.ObserveLevels([]bucket.Item{{Key: "a", Limit: q}}, bucket.Decision{Allowed: true, DeniedBy: -1, Buckets: []bucket.Status{{Remaining: 300}}})
	if st, err := f.Held(context.Background(), "a", q); err != nil || st.Remaining != 1666 {
		t.Fatalf("step 1 (held): %+v, %v; want the full share 1666, unseeded", st, err)
	}
	if d, err := f.Take(context.Background(), "", []bucket.Item{{Key: "a", Limit: q}}); err != nil || d.Buckets[0].Remaining != 100 {
		t.Fatalf("step 2 (a take of nothing): %+v, %v; want 300 / 3 = 100 left, seeded", d, err)
	}
	if st, err := f.Held(context.Background(), "a", q); err != nil || st.Remaining != 100 {
		t.Fatalf("step 3 (held): %+v, %v; want the seeded 100", st, err)
	}
}

// TestFallbackSeenConcurrent observes and takes one key from several
// goroutines (run with -race): whatever the order, a node never admits
// more than its share in the period.
func TestFallbackSeenConcurrent(t *testing.T) {
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	q := bucket.Quota(3000, day, day.Add(24*time.Hour))
	clock := &seenClock{t: day.Add(time.Hour)}
	f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 3, Memory: bucket.MemoryOptions{Now: clock.now, SweepEvery: -1}})
	defer f.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 { // bounded
				if (i+g)%3 == 0 {
					f.ObserveLevels([]bucket.Item{{Key: "a", Limit: q}}, bucket.Decision{Allowed: true, DeniedBy: -1, Buckets: []bucket.Status{{Remaining: int64(3000 - i)}}})
					continue
				}
				if d, err := f.Take(context.Background(), "", []bucket.Item{{Key: "a", Limit: q, Cost: 1}}); err == nil && d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n > 1000 {
		t.Errorf("admitted %d units, over the node's share of 1000", n)
	}
}
