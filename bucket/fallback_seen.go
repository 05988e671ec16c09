package bucket

import (
	"math"
	"strings"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"
)

// DefaultFallbackSeen is FallbackOptions.MaxSeen's default: how many
// quotas and window counters a Fallback remembers the shared level of at
// once. Measured: 7.6 MiB of heap for 2^16 keys of 60 bytes, the cache full
// (2^17 keys offered), about 120 bytes a key with the key's copy.
const DefaultFallbackSeen = 1 << 16

// LevelObserver is told what the shared store answered to a take, so that
// a fail-open fallback can start a quota or window counter where the
// shared one was instead of full (Fallback implements it; meter calls it
// after each take the store answered).
type LevelObserver interface {
	// ObserveLevels records, for each quota and window counter of items,
	// its Remaining units in d and the period (a quota's WindowStart, a
	// window counter's d.Windows[i]) they were read in. Items of other
	// kinds are skipped, and so is a cached denial (d.Cached): its status
	// is a copy of the store's earlier denial, observed then, and taken
	// again it could replace a newer, lower reading. A reading older than
	// the key's last one by the store's clock (the take's Redis TIME) is
	// dropped: two takes of one key may be observed in the other order
	// than the store ran them. It must not keep items or d. Safe for
	// concurrent use; no allocation once a key is known.
	ObserveLevels(items []Item, d Decision)
	// ObserveDelta moves the reading of d.Key by a reconciliation the
	// node sends to the shared store after that reading: Remaining less
	// d.Units (a charge lowers it, a refund raises it), when the reading
	// is of d.Limit's Capacity and period (a quota's WindowStart, a window
	// counter's, which the caller sets to the window its take counted in).
	// The caller must send only deltas of takes the shared store judged
	// and the node observed (ObserveLevels), not of a sharded bucket's
	// shards nor of a take the fallback served. A key with no reading is
	// left alone. Safe for concurrent use; no allocation.
	ObserveDelta(d Delta)
}

var _ LevelObserver = (*Fallback)(nil)

// seenLevel is one bucket's shared level as the node's last successful take
// (or denial) reported it, moved by the node's reconciliations since
// (ObserveDelta). Its mutex is held while a Fallback seeds its
// bucket from it, so that no concurrent fallback take of that key can pass
// before the seed is applied.
type seenLevel struct {
	mu        sync.Mutex
	remaining int64 // units left in the shared bucket (negative: in debt)
	window    int64 // µs since the Unix epoch: the quota's WindowStart or the counter's window start
	capacity  int64 // the limit's Capacity the reading was made under
	per       int64 // µs: a window counter's Per; 0 for a quota
	// at orders readings: the store's instant of the take that made it, µs
	// since the Unix epoch on the store's clock (Redis TIME), or a lower
	// bound of it (readingAt).
	at    int64
	fresh bool // not yet used to seed the fallback's bucket
}

// newSeen returns the LRU of readings, bounded by max keys (below 1:
// DefaultFallbackSeen).
func newSeen(max int) *otter.Cache[string, *seenLevel] {
	if max <= 0 {
		max = DefaultFallbackSeen
	}
	return otter.Must(&otter.Options[string, *seenLevel]{
		MaximumSize: max,
		// Maintenance runs on the calling goroutine, amortized over the
		// writes, rather than in a goroutine per drain.
		Executor: func(fn func()) { fn() },
	})
}

// readingOf returns the period and per of item i's reading in d, and
// whether it is one to keep: a quota's or a window counter's, not leased
// (a lease's status is the node's own), with a known status and window,
// not of a cached denial (see LevelObserver).
func readingOf(it *Item, d *Decision, i int) (window, per int64, ok bool) {
	if it.Lease.Size > 0 || i >= len(d.Buckets) || d.Cached {
		return 0, 0, false
	}
	switch {
	case it.Limit.IsQuota():
		return it.Limit.WindowStart.UnixMicro(), 0, true
	case it.Limit.IsWindow() && i < len(d.Windows) && !d.Windows[i].IsZero():
		return d.Windows[i].UnixMicro(), it.Limit.Per.Microseconds(), true
	}
	return 0, 0, false
}

// readingAt returns the instant, µs since the Unix epoch on the store's
// clock (Redis TIME), at which the store read st, the status of a quota or
// window counter l whose period starts at window (µs), worked out from its
// Reset, which the store computed from that instant (µs until the
// period's end, or until nothing counted weighs): a quota's WindowEnd less
// Reset, a fixed window's end less Reset, a sliding window's start plus
// two windows less Reset when Reset is above Per (its current window
// counts something), plus one window less Reset when Reset is at most Per
// (only the previous one does). When Reset is 0 (a quota's window over, a
// sliding window empty: Remaining is then Capacity), only a lower bound:
// the quota's WindowEnd, the window's start.
func readingAt(l *Limit, st Status, window, per int64) int64 {
	reset := int64(st.Reset / time.Microsecond)
	switch {
	case l.IsQuota():
		return l.WindowEnd.UnixMicro() - reset
	case l.Algorithm == FixedWindow:
		return window + per - reset
	case reset > per:
		return window + 2*per - reset
	case reset > 0:
		return window + per - reset
	}
	return window
}

// ObserveLevels implements LevelObserver: each quota's and window
// counter's reading replaces the key's last one, fresh again for the next
// outage, unless the key's last one was read later (readingAt: the take's
// Redis TIME, worked out from its Reset), or at the same instant with
// fewer units left (a later take of the same call, which runs its takes
// in order at one instant): two takes of one key on one node can be
// observed in the other order than Redis ran them, and the older reading
// (with more left, unless a refund came between) must not replace the
// newer. A reading whose instant is only bounded (readingAt) is ordered
// by its bound: when that loses, the reading (a sliding window's empty
// counter, all of Capacity left) is dropped, and the fallback seeds from
// the lower one it has. A Redis whose clock is behind the one before it
// (a failover) has its readings of a key dropped until its clock passes
// the key's last reading, at most the two clocks' skew. A key seen for the
// first time takes a slot in the LRU (FallbackOptions.MaxSeen); the least
// recently used key is then
// forgotten, and its fallback bucket starts full as if never seen.
//
// Token buckets are not remembered. Their honest seed, the level read plus
// the node's refill since, needs the instant of each reading: a clock read
// on every take (meter reads none for token buckets: 100–450 ns on a
// virtual machine's kvm-clock) and an LRU write per token bucket per take,
// where most policies' rules are token buckets. And the gain is small: a
// token bucket's fresh fallback adds at most one burst at the outage's
// start and then refills at the node's share of the rate, as the shared
// bucket does, while a quota's fresh share can be the rest of a period.
func (f *Fallback) ObserveLevels(items []Item, d Decision) {
	for i := range items {
		it := &items[i]
		window, per, ok := readingOf(it, &d, i)
		if !ok {
			continue
		}
		st := d.Buckets[i]
		at := readingAt(&it.Limit, st, window, per)
		s, found := f.seen.GetIfPresent(it.Key)
		if !found {
			s = &seenLevel{}
		}
		s.mu.Lock()
		if !found || at > s.at || at == s.at && st.Remaining <= s.remaining {
			s.remaining, s.window, s.capacity, s.per, s.at, s.fresh = st.Remaining, window, it.Limit.Capacity, per, at, true
		}
		s.mu.Unlock()
		if !found {
			// The key is copied: the caller's may alias a larger buffer.
			f.seen.Set(strings.Clone(it.Key), s)
		}
	}
}

// ObserveDelta implements LevelObserver. A reading is what the shared
// bucket held right after one of the node's takes (its reservation
// included): a later reconciliation of the node's is what that
// reservation turned out to cost, applied after the reading, so the
// reading moved by it is what the bucket holds after both, as the reading
// itself was, unless other nodes took since (which every reading misses;
// seed divides it among the nodes for that). The take the delta settles
// is the reading's or an earlier one (a later take of the node would have
// replaced the reading), so its reservation is in the reading and its
// refund can be given back. A refund raises the reading even if the
// reconciliation is then lost on its way to the store: what the reading
// counts is what the requests used, which the shared bucket then
// overstates. The reading stays fresh or spent as it was: a delta is no
// new reading of the store.
func (f *Fallback) ObserveDelta(d Delta) {
	if d.Units == 0 || !(d.Limit.IsQuota() || d.Limit.IsWindow()) {
		return
	}
	s, ok := f.seen.GetIfPresent(d.Key)
	if !ok {
		return
	}
	window, per := d.Limit.WindowStart.UnixMicro(), int64(0)
	if d.Limit.IsWindow() {
		per = d.Limit.Per.Microseconds()
	}
	s.mu.Lock()
	if s.window == window && s.capacity == d.Limit.Capacity && s.per == per {
		s.remaining = subUnits(s.remaining, d.Units)
	}
	s.mu.Unlock()
}

// subUnits is a − b, saturating at the int64 range (a reading in debt, a
// delta of the largest units).
func subUnits(a, b int64) int64 {
	r := a - b
	switch {
	case b > 0 && r > a:
		return math.MinInt64
	case b < 0 && r < a:
		return math.MaxInt64
	}
	return r
}

// seed brings the node's bucket of item it (a quota or window counter),
// scaled to node, down to what the shared bucket had left at the node's
// last reading, divided among the nodes: its count is raised to at least
// node.Capacity − min(node.Capacity, max(0, remaining) / nodes), when the
// reading is fresh, made under the same Capacity (and Per), and of the
// period the fallback now counts in. The reading is then spent: a later
// outage seeds again only from a newer one.
func (f *Fallback) seed(it *Item, node Limit) {
	s, ok := f.seen.GetIfPresent(it.Key)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh {
		return
	}
	s.fresh = false
	if s.capacity != it.Limit.Capacity || (it.Limit.IsWindow() && s.per != it.Limit.Per.Microseconds()) {
		return // the limit changed since: its reading says nothing of the new one
	}
	left := min(node.Capacity, max(0, s.remaining)/int64(f.nodes))
	if used := node.Capacity - left; used > 0 {
		f.mem.raiseTo(it.Key, node, float64(used), s.window)
	}
}

// raiseTo raises the count of the quota or window counter at key, under
// limit l, to at least used units, if its period is window (µs since the
// Unix epoch): a quota's WindowStart, a window counter's start on m's
// clock now. A quota whose stored window is older starts from used; a
// later one, or a counter now in another window, is left alone (a new
// period starts full). A sliding window's count is its weighted one.
func (m *Memory) raiseTo(key string, l Limit, used float64, window int64) {
	sh := &m.shards[m.shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := m.now().UnixMicro()
	e, at := sh.lookup(key)
	if l.IsQuota() {
		_, windowStart, windowEnd := l.window()
		if window != windowStart {
			return
		}
		have, w := 0.0, windowStart
		if at != nil && !e.gone && e.quota {
			have, w = e.used, e.window
		}
		have, w = roll(have, w, windowStart, windowEnd)
		if w != windowStart || have >= used {
			return
		}
		sh.putQuota(key, at, used, w, windowStart, windowEnd, now, e.dropAt)
		return
	}
	_, per, _, sliding := l.windowed()
	prev, cur, start := 0.0, 0.0, int64(-1)
	if at != nil && !e.gone && e.win {
		prev, cur, start = e.prev, e.used, e.window
	}
	prev, cur, start = slide(prev, cur, start, per, now, sliding)
	if start != window {
		return
	}
	if short := used - weigh(prev, cur, start, per, now, sliding); short > 0 {
		sh.putWindow(key, at, prev, cur+short, start, per, now, sliding)
	}
}
