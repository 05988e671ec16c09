package bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// A hot bucket (a global limit every request takes from, or a huge
// tenant's) puts all of its load on one Redis key, hence on one master of
// a Redis Cluster. Sharding splits it into K sub-buckets, the shards, each
// holding 1/K of the limit under a key of its own hash tag, so that K
// masters share the load. A request takes from one shard, chosen at
// random, and tries the others before it is denied: each try is one
// two-phase Take of all of the request's buckets, so a denied try spends
// nothing. The shards add up to the limit exactly, so sharding never
// admits more than the limit; it may admit less (see TakeSharded).

// MaxShards is the most shards a bucket may be split into. A denied
// request may try every shard, one Store.Take each.
const MaxShards = 256

// ShardKeys names the shards of a sharded bucket: shard i's key is Prefix,
// then i in decimal, then Suffix (policy.Rule.ShardKeys gives each shard a
// Redis Cluster hash tag of its own). The zero value names nothing.
type ShardKeys struct{ Prefix, Suffix string }

// Key is the store key of shard i.
func (k ShardKeys) Key(i int) string { return k.Prefix + strconv.Itoa(i) + k.Suffix }

// ShardLimit returns shard i's share of l split into shards shards (0 <= i
// < shards): Capacity and, for a token bucket, Rate divided by shards,
// rounded down, with the remainders given one unit each to the first
// shards, so that the shards' capacities and rates add up to l's exactly
// (never more: no over-admission; never less). Per and a quota's window are
// l's. shards below 2 returns l. A share is zero, which Validate refuses,
// when shards exceeds l's Capacity or Rate in units.
func ShardLimit(l Limit, shards, i int) Limit {
	if shards < 2 {
		return l
	}
	s := l
	s.Capacity = shareOf(l.Capacity, shards, i)
	if !l.IsQuota() {
		s.Rate = shareOf(l.Rate, shards, i)
	}
	return s
}

// shareOf is shard i's share of total units split into k shards.
func shareOf(total int64, k, i int) int64 {
	q, r := total/int64(k), total%int64(k)
	if int64(i) < r {
		return q + 1
	}
	return q
}

// ShardedItem is one bucket of a request for TakeSharded: an Item whose
// bucket may be split into Shards shards. Item.Limit is the whole limit and
// Item.Cost the request's cost in its units. With Shards 0 or 1 the bucket
// is Item.Key, as for Store.Take; with Shards K >= 2, shard i is the bucket
// Keys.Key(i) of ShardLimit(Limit, K, i), and Item.Key is not used by the
// store (the caller may keep the unsharded key there, to name the bucket).
// A leased item (Item.Lease, for a Leased store) leases each shard for
// Size/K, rounded up.
type ShardedItem struct {
	Item
	Shards int
	Keys   ShardKeys
}

// ShardedDecision is the outcome of TakeSharded: a Decision over the
// ShardedItems (DeniedBy indexes them), with what was taken.
//
// Buckets holds one Status per ShardedItem. For a sharded one it describes
// the whole limit, estimated from the shards the take saw: Remaining is the
// units those shards held before this request, scaled from the shards seen
// to all K (exact once every shard was seen, as on a denial), capped at
// Capacity, less what this request took; Reset is the time a bucket of the
// whole limit takes to refill from that Remaining (a quota: until its window
// ends). Cached is set when a Status is unknown (a try was answered by a
// DenyCache): Buckets[DeniedBy] is known, the others may be zero.
type ShardedDecision struct {
	Decision
	// Taken holds, per ShardedItem when Allowed, the buckets its cost was
	// taken from, with their limits and costs: the item itself when it is
	// not sharded; one or more shards, under their own keys and
	// ShardLimits, when it is. Reconcile those buckets (see SplitDelta).
	// Nil when denied.
	Taken [][]Item
	// Tries is the number of Store.Take calls made: 1 when the first try
	// decided.
	Tries int
	// ID is the request id the admitted try took under (the take's
	// requestID, or requestID + "/<try>" for a later try): Store.Void it,
	// with Taken's buckets, to give the take back. "" when denied.
	ID string
}

// TakeSharded takes a request's buckets, some of them split into shards,
// from s: the two-phase all-or-nothing take of Store.Take, over the shards
// it picks for each sharded item.
//
// The first try takes each sharded item's cost from the shard start(K)
// picks (nil: at random). An item that costs more than the smallest shard
// holds (Capacity/K, rounded down) is taken from m consecutive shards at
// once, m = ⌈cost / (Capacity/K)⌉, its cost split evenly among them (a
// cost above the whole Capacity is split over all K, and the store reports
// it too large). When a try is denied by a sharded item's shard, the next
// try moves that item to the next shards, until every shard was tried
// (⌈K/m⌉ tries); then, when the shards' Remaining as those tries saw them
// add up to its cost, one last try takes it from several shards at once,
// each paying at most what it held. A denial by an unsharded item, or a
// too-large one, ends the take. Each try is one Store.Take, under
// requestID for the first and requestID + "/<try>" for the next ones (a
// store records a request id's take once), so that a denied try spends
// nothing; RetryAfter is the least wait among the denied tries. Over a
// DenyCache, its OnCached hook hears of a cached denial only when it is the
// last try's: once per denied request, never for an admitted one.
//
// With ctx marked by WithPartial (a Redis Cluster whose masters may fail
// one at a time), a try that fails for some of its buckets (a
// *PartialError) or whole does not end the take while a sharded item
// whose shard failed has shards left that were not tried: the failed
// shards are left out from then on, the item moves to the next shards
// none of which failed, and the try's served part, when it was admitted,
// is given back first (Store.Void of the try's id; Reconcile of the
// negated costs for an empty requestID), so that a failed try holds
// nothing. A whole failure moves every sharded item on (the failing
// master is not known), an unsharded item whose bucket failed is left out
// of the later tries. An item fails when its bucket failed (unsharded) or
// every shard it could move to failed; the take then returns, over the
// items served, the Decision with a *PartialError naming the failed items
// (ShardedItem indexes; their Statuses and Taken empty), or, when no item
// was served, the first failure, whole. A take moves on after one try
// that timed out, not after a second (each such try waits out the
// caller's deadline: a store that does not answer at all would cost that
// once per shard; a Guarded store's breaker soon rejects a silent
// master's calls unsent, which moves on at once). Without the mark, a
// failure ends the take as before.
//
// Never over-admission: the shards' capacities and rates add up to the
// limit's, and each try is all or nothing. Under-admission: a denial
// means that the shards, as its tries saw them, held less than the cost in
// whole units (each shard's level rounded down), so a sharded limit may
// deny a request with up to K−1 more units in the whole limit than one
// bucket (the fractions of K levels), plus whatever changed between its
// tries; and a full shard stops refilling while the others are not full
// (README, "Sharded limits").
//
// Errors: ErrInvalid (wrapped) for a Shards outside [0, MaxShards] or a
// limit whose shards would hold or refill less than one unit, a
// *PartialError as above, and anything Store.Take returns (the tries
// before the failed one were denials, which spent nothing, or failed tries
// given back). On an error other than a *PartialError the ShardedDecision
// is the zero value.
func TakeSharded(ctx context.Context, s Store, requestID string, items []ShardedItem, start func(shards int) int) (ShardedDecision, error) {
	if start == nil {
		start = rand.IntN
	}
	if err := validateSharded(items); err != nil {
		return ShardedDecision{}, err
	}
	plans := make([]*shardPlan, len(items))
	for i, it := range items {
		if it.Shards > 1 {
			plans[i] = newShardPlan(it, start(it.Shards))
		}
	}
	last := make([]Status, len(items)) // unsharded items: the status last seen
	known := make([]bool, len(items))
	out := ShardedDecision{}
	retry := time.Duration(-1)
	var flat []Item
	var owner []int // owner[f]: the item flat[f] belongs to
	// fails: the items that failed (nil until one did) and the first
	// failure (WithPartial only).
	var fails *shardFails
	partial := PartialAllowed(ctx)
	timeouts := 0 // the tries that timed out
	hit := &cachedTry{}
	ctx = context.WithValue(ctx, cachedTryKey{}, hit)
	for try := 0; ; try++ {
		flat, owner = flatten(items, plans, fails, flat[:0], owner[:0])
		if len(flat) == 0 { // every item failed (fails is set)
			return ShardedDecision{}, fails.first
		}
		hit.report = nil
		id := tryID(requestID, try)
		d, err := s.Take(ctx, id, flat)
		out.Tries++
		var pe *PartialError
		if err != nil {
			if pe = AsPartial(err); pe == nil || len(d.Buckets) != len(flat) {
				if !partial || errors.Is(err, ErrInvalid) || errors.Is(err, ErrVoided) || timedOut(err, &timeouts) {
					return ShardedDecision{}, err
				}
				// Failed whole: every sharded item moves on, when one can.
				if fails == nil {
					fails = newShardFails(len(items), err)
				}
				if !fails.moveAll(plans) {
					return ShardedDecision{}, err
				}
				continue
			}
			if fails == nil {
				fails = newShardFails(len(items), pe.Err)
			}
		}
		for f, i := range owner {
			if d.Cached && f != d.DeniedBy {
				continue // not known
			}
			if pe != nil && slices.Contains(pe.Failed, f) {
				continue // its status is not known: nothing was seen
			}
			if p := plans[i]; p != nil {
				p.observe(f-firstOf(owner, f), d.Buckets[f], d.Allowed)
			} else {
				last[i], known[i] = d.Buckets[f], true
			}
		}
		moved := false
		if pe != nil {
			moved = fails.fail(pe, owner, plans, !timedOut(pe.Err, &timeouts))
		}
		if d.Allowed && (moved || fails.servedOfFailed(owner, pe)) {
			// A sharded item moves on to shards that did not fail, or one
			// failed while some of its shards took: give the served part
			// of this try back before the next (which leaves a failed item
			// out).
			if err := giveBackTry(s, id, flat, pe.Failed); err != nil {
				return ShardedDecision{}, err
			}
			continue
		}
		if d.Allowed {
			out.Decision = Decision{Allowed: true, DeniedBy: -1, Buckets: make([]Status, len(items))}
			out.Taken = make([][]Item, len(items))
			out.ID = id
			for f, i := range owner {
				if pe != nil && slices.Contains(pe.Failed, f) {
					continue
				}
				out.Taken[i] = append(out.Taken[i], flat[f])
			}
			if d.Windows != nil { // an unsharded window counter's window, at its item
				out.Windows = make([]time.Time, len(items))
				for f, i := range owner {
					if plans[i] == nil && !fails.failed(i) {
						out.Windows[i] = d.Windows[f]
					}
				}
			}
			for i, p := range plans {
				switch {
				case fails.failed(i):
				case p == nil:
					out.Buckets[i] = last[i]
				default:
					out.Buckets[i], _ = p.status(items[i].Cost)
				}
			}
			return out, fails.err()
		}
		if !d.TooLarge && (retry < 0 || d.RetryAfter < retry) {
			retry = d.RetryAfter
		}
		p := plans[owner[d.DeniedBy]]
		if p != nil && !d.TooLarge && p.next(fails.deadOf(owner[d.DeniedBy])) {
			continue
		}
		for i, p := range plans {
			if p != nil && fails.deadOf(i) != nil && !p.anySeen() {
				fails.item[i] = true // it failed, and moved on to no try: not known
			}
		}
		if hit.report != nil && d.Cached { // this try, the take's last, was a cached denial
			hit.report(hit.item)
		}
		out.Decision = Decision{DeniedBy: owner[d.DeniedBy], TooLarge: d.TooLarge, RetryAfter: max(retry, 0), Buckets: make([]Status, len(items))}
		if d.TooLarge {
			out.RetryAfter = 0
		}
		for i, p := range plans {
			ok := known[i]
			switch {
			case fails.failed(i):
				ok = true
			case p == nil:
				out.Buckets[i] = last[i]
			default:
				out.Buckets[i], ok = p.status(0)
			}
			out.Cached = out.Cached || !ok
		}
		return out, fails.err()
	}
}

// timedOut counts a failure err that timed out in *n, and reports whether
// it is one more than a take moves on after: a second timeout.
func timedOut(err error, n *int) bool {
	if KindOf(err) != KindTimeout {
		return false
	}
	*n++
	return *n > 1
}

// shardFails is what failed in a TakeSharded made with WithPartial: the
// items judged failed, the shards of each sharded item that failed, and
// the first failure. Its methods take a nil receiver for "nothing failed".
type shardFails struct {
	item  []bool
	dead  [][]bool // per item, per shard: nil until one of its shards failed
	first error
}

func newShardFails(n int, first error) *shardFails {
	return &shardFails{item: make([]bool, n), dead: make([][]bool, n), first: first}
}

// failed reports whether item i failed.
func (sf *shardFails) failed(i int) bool { return sf != nil && sf.item[i] }

// deadOf is item i's failed shards, nil when none failed.
func (sf *shardFails) deadOf(i int) []bool {
	if sf == nil {
		return nil
	}
	return sf.dead[i]
}

// servedOfFailed reports whether a bucket of a try (owned by owner) that
// did not fail (not in pe.Failed) belongs to an item that failed: one of
// several shards of an item whose other shards failed.
func (sf *shardFails) servedOfFailed(owner []int, pe *PartialError) bool {
	if sf == nil || pe == nil {
		return false
	}
	for f, i := range owner {
		if sf.item[i] && !slices.Contains(pe.Failed, f) {
			return true
		}
	}
	return false
}

// kill records that shard j of item i (of k shards) failed.
func (sf *shardFails) kill(i, j, k int) {
	if sf.dead[i] == nil {
		sf.dead[i] = make([]bool, k)
	}
	sf.dead[i][j] = true
}

// fail records the failed buckets of a try served in part (pe, over flat,
// owned by owner): an unsharded item's bucket fails the item; a sharded
// item's failed shard is left out, and the item moves to shards that did
// not fail (move), or fails when none is left. It reports whether an item
// moved.
func (sf *shardFails) fail(pe *PartialError, owner []int, plans []*shardPlan, move bool) bool {
	moved := false
	for n, f := range pe.Failed {
		if f < 0 || f >= len(owner) {
			continue
		}
		i := owner[f]
		p := plans[i]
		if p == nil {
			sf.item[i] = true
			continue
		}
		sf.kill(i, p.pieces[f-firstOf(owner, f)].shard, p.k)
		if n+1 < len(pe.Failed) && owner[pe.Failed[n+1]] == i {
			continue // the item's next failed piece first
		}
		switch {
		case sf.item[i]:
		case move && p.next(sf.dead[i]):
			moved = true
		default:
			sf.item[i] = true
		}
	}
	return moved
}

// moveAll records a try that failed whole: every shard it took from
// failed; each sharded item moves to shards that did not fail, and false
// is returned when none can (the take then fails whole).
func (sf *shardFails) moveAll(plans []*shardPlan) bool {
	moved := false
	for i, p := range plans {
		if p == nil || sf.item[i] {
			continue
		}
		for _, pc := range p.pieces {
			sf.kill(i, pc.shard, p.k)
		}
		if p.next(sf.dead[i]) {
			moved = true
		} else {
			sf.item[i] = true
		}
	}
	return moved
}

// err is the *PartialError of a take whose failed items are sf's, nil
// when none failed.
func (sf *shardFails) err() error {
	if sf == nil {
		return nil
	}
	var failed []int
	for i, f := range sf.item {
		if f {
			failed = append(failed, i)
		}
	}
	if failed == nil {
		return nil
	}
	return &PartialError{Failed: failed, Err: sf.first}
}

// giveBackTry gives back what the try id took from flat's buckets but
// those at failed (ascending): Void of id, or Reconcile of the negated
// costs for an empty id.
func giveBackTry(s Store, id string, flat []Item, failed []int) error {
	served := make([]Item, 0, len(flat))
	for f, it := range flat {
		if it.Cost != 0 && !slices.Contains(failed, f) {
			served = append(served, it)
		}
	}
	if len(served) == 0 {
		return nil
	}
	ctx := context.Background() // a remote store bounds its own calls (Guarded)
	if id != "" {
		return s.Void(ctx, id, served)
	}
	return s.Reconcile(ctx, "", refunds(served))
}

// tryID is the request id of try number try (from 0) of requestID.
func tryID(requestID string, try int) string {
	if requestID == "" || try == 0 {
		return requestID
	}
	return requestID + "/" + strconv.Itoa(try)
}

// flatten appends the buckets of the next try to flat: each unsharded item
// as it is, each sharded one as its plan's current pieces, but the items
// that failed; owner[f] is the item of flat[f].
func flatten(items []ShardedItem, plans []*shardPlan, fails *shardFails, flat []Item, owner []int) ([]Item, []int) {
	for i, it := range items {
		if fails.failed(i) {
			continue
		}
		if p := plans[i]; p != nil {
			for _, pc := range p.pieces {
				flat = append(flat, pc.item)
				owner = append(owner, i)
			}
			continue
		}
		flat = append(flat, it.Item)
		owner = append(owner, i)
	}
	return flat, owner
}

// firstOf is the index in owner of the first bucket of the item of flat
// index f.
func firstOf(owner []int, f int) int {
	for f > 0 && owner[f-1] == owner[f] {
		f--
	}
	return f
}

func validateSharded(items []ShardedItem) error {
	for _, it := range items {
		switch {
		case it.Shards < 0 || it.Shards > MaxShards:
			return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("%d shards is not in [0, %d]: %w", it.Shards, MaxShards, ErrInvalid)}
		case it.Shards < 2:
			continue
		}
		if err := it.Limit.validate(); err != nil {
			return &StoreError{Op: "take", Subject: it.Keys.Key(0), Err: err}
		}
		// The last shard has the smallest share.
		last := ShardLimit(it.Limit, it.Shards, it.Shards-1)
		if err := last.validate(); err != nil {
			return &StoreError{Op: "take", Subject: it.Keys.Key(0), Err: fmt.Errorf("%d shards of this limit: %w", it.Shards, err)}
		}
		if it.Cost < 0 {
			return &StoreError{Op: "take", Subject: it.Keys.Key(0), Err: fmt.Errorf("cost %d is negative: %w", it.Cost, ErrInvalid)}
		}
	}
	return nil
}

// shardPlan is the shards one sharded item takes from, try by try, and what
// the tries saw of them.
type shardPlan struct {
	it      ShardedItem
	k       int
	start   int
	m       int // shards per window
	window  int // the current window, from 0
	windows int // ⌈k/m⌉
	// gathered: the last try, from several shards by what they held, was
	// planned.
	gathered bool
	pieces   []piece
	// held[i] is what shard i held before this request's take, in units
	// (its Remaining, plus the piece taken when the try was admitted), and
	// reset[i] its Reset, as last seen; seen[i] whether it was seen.
	held  []int64
	reset []time.Duration
	seen  []bool
}

// piece is one shard of a try: its index and its Item.
type piece struct {
	shard int
	item  Item
}

func newShardPlan(it ShardedItem, start int) *shardPlan {
	k := it.Shards
	p := &shardPlan{it: it, k: k, start: ((start % k) + k) % k,
		held: make([]int64, k), reset: make([]time.Duration, k), seen: make([]bool, k)}
	smallest := ShardLimit(it.Limit, k, k-1).Capacity
	p.m = 1
	switch {
	case smallest <= 0:
		p.m = k
	case it.Cost > smallest:
		// ⌈cost/smallest⌉ without cost+smallest−1, which overflows for a
		// cost near MaxInt64 (an image request of 10^15 images): a negative
		// m took the limit out of the take altogether.
		need := it.Cost / smallest
		if it.Cost%smallest != 0 {
			need++
		}
		p.m = int(min(int64(k), need))
	}
	p.windows = (k + p.m - 1) / p.m
	p.pieces = p.windowPieces()
	return p
}

// windowPieces splits the cost evenly over the m shards of the current
// window, from start + window×m on: cost/m each, the remainder one unit
// each to the shards of larger share first (the first shards of ShardLimit),
// so that no piece exceeds its shard's capacity unless the cost exceeds
// the window's capacity.
func (p *shardPlan) windowPieces() []piece {
	ps := p.pieces[:0]
	for j := range p.m {
		i := (p.start + p.window*p.m + j) % p.k
		ps = append(ps, piece{shard: i, item: Item{Key: p.it.Keys.Key(i), Limit: ShardLimit(p.it.Limit, p.k, i), Lease: p.it.Lease.shard(p.k)}})
	}
	base, rem := p.it.Cost/int64(p.m), p.it.Cost%int64(p.m)
	order := make([]int, len(ps))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ps[b].item.Limit.Capacity, ps[a].item.Limit.Capacity) })
	for n, j := range order {
		ps[j].item.Cost = base
		if int64(n) < rem {
			ps[j].item.Cost++
		}
	}
	return ps
}

// observe records what a try saw of piece j: st, with its cost still in the
// shard when taken was set.
func (p *shardPlan) observe(j int, st Status, taken bool) {
	pc := p.pieces[j]
	p.held[pc.shard], p.reset[pc.shard], p.seen[pc.shard] = st.Remaining, st.Reset, true
	if taken {
		p.held[pc.shard] += pc.item.Cost
	}
}

// next plans the next try after a denial by one of the item's shards, or
// a failure of one (dead: the shards that failed, nil when none did), and
// reports false when none is left: the next window of shards none of
// which failed, then once the take from several shards by what they held.
func (p *shardPlan) next(dead []bool) bool {
	for p.window+1 < p.windows {
		p.window++
		p.pieces = p.windowPieces()
		if !p.touches(dead) {
			return true
		}
	}
	if p.gathered {
		return false
	}
	p.gathered = true
	return p.gather(dead)
}

// touches reports whether a piece of the current try is on a shard of
// dead.
func (p *shardPlan) touches(dead []bool) bool {
	if dead == nil {
		return false
	}
	for _, pc := range p.pieces {
		if dead[pc.shard] {
			return true
		}
	}
	return false
}

// gather plans a take of the cost from the shards that held the most, as
// last seen, each paying at most what it held in whole units, the shards
// of dead left out; false when another shard was not seen or together they
// held less than the cost.
func (p *shardPlan) gather(dead []bool) bool {
	order := make([]int, 0, p.k)
	var sum int64
	for i := range p.k {
		if dead != nil && dead[i] {
			continue
		}
		if !p.seen[i] {
			return false
		}
		if p.held[i] > 0 {
			order = append(order, i)
			sum += p.held[i]
		}
	}
	if sum < p.it.Cost || p.it.Cost == 0 {
		return false
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p.held[b], p.held[a]) })
	ps := p.pieces[:0]
	left := p.it.Cost
	for _, i := range order {
		if left == 0 {
			break
		}
		c := min(left, p.held[i])
		ps = append(ps, piece{shard: i, item: Item{Key: p.it.Keys.Key(i), Limit: ShardLimit(p.it.Limit, p.k, i), Cost: c,
			Lease: p.it.Lease.shard(p.k)}})
		left -= c
	}
	p.pieces = ps
	return true
}

// anySeen reports whether a try saw one of the item's shards.
func (p *shardPlan) anySeen() bool { return slices.Contains(p.seen, true) }

// status estimates the whole limit's Status from the shards seen, after
// this request took taken units (0 on a denial); false when no shard was
// seen. See ShardedDecision.
func (p *shardPlan) status(taken int64) (Status, bool) {
	var sum float64
	var n int
	var reset time.Duration
	for i := range p.k {
		if p.seen[i] {
			sum += float64(p.held[i])
			reset = max(reset, p.reset[i])
			n++
		}
	}
	if n == 0 {
		return Status{}, false
	}
	l := p.it.Limit
	est := min(floorUnits(sum*float64(p.k)/float64(n)), l.Capacity) - taken
	if l.IsQuota() {
		return Status{Remaining: est, Reset: reset}, true
	}
	capacity, rate, per := l.floats()
	return status(float64(est), capacity, rate, per), true
}

// SplitDelta appends to dst the reconciliation of units (actual − reserved,
// in the limit's units) over the buckets a take took from (one
// ShardedDecision.Taken entry), each with its own key and limit: all of it
// to a single bucket; over several, shares in proportion to what each paid
// (rounded toward zero, the remainder one unit each to the first buckets
// that can take it), so that a refund never gives a shard back more than it
// paid: a quota shard's refund must not return units that other requests
// used. A refund is at most what the take paid (actual usage is never
// negative). A take of zero cost puts a charge on its first bucket.
func SplitDelta(dst []Delta, taken []Item, units int64) []Delta {
	if len(taken) == 0 || units == 0 {
		return dst
	}
	if len(taken) == 1 {
		return append(dst, Delta{Key: taken[0].Key, Limit: taken[0].Limit, Units: units})
	}
	var total uint64
	for _, it := range taken {
		total += uint64(it.Cost)
	}
	if total == 0 {
		return append(dst, Delta{Key: taken[0].Key, Limit: taken[0].Limit, Units: units})
	}
	mag := uint64(units) // |units|, MinInt64 included
	if units < 0 {
		mag = -mag
	}
	n := len(dst)
	left := mag
	for _, it := range taken {
		hi, lo := bits.Mul64(mag, uint64(it.Cost))
		q, _ := bits.Div64(hi, lo, total) // hi < it.Cost <= total
		left -= q
		dst = append(dst, Delta{Key: it.Key, Limit: it.Limit, Units: int64(q)})
	}
	// Each share lost less than one unit to rounding, so left < len(taken);
	// a refund (mag <= total) has room for it below what the shards paid.
	for j := n; left > 0 && j < len(dst); j++ {
		if units < 0 && uint64(dst[j].Units) >= uint64(taken[j-n].Cost) {
			continue // a refund never above what the shard paid
		}
		dst[j].Units++
		left--
	}
	if units < 0 {
		for j := n; j < len(dst); j++ {
			dst[j].Units = -dst[j].Units
		}
	}
	out := dst[:n]
	for _, d := range dst[n:] {
		if d.Units != 0 {
			out = append(out, d)
		}
	}
	return out
}
