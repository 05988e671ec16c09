package bucket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/lua"
)

// DefaultTakeBatch is RedisOptions.TakeBatch's default: at most this many
// takes of one slot share a script call.
const DefaultTakeBatch = 32

// errTakeReply is the error of a batch element whose reply is not a list of
// integers (a script that does not match this build).
var errTakeReply = errors.New("unexpected take reply in a batch")

// takeBatcher coalesces the takes of one Redis store per hash slot (slot 0
// on a single Redis): a take finds its slot idle and is sent at once, alone,
// as before batching (so a lone caller waits for nothing); takes that arrive
// while a call of their slot is in flight queue, and when it returns they go
// in one script call (lua/takebatch.lua, at most max of them), each
// its own two-phase take, in order of arrival. One call per slot is in
// flight at a time. It is safe for concurrent use.
type takeBatcher struct {
	r   *Redis
	max int
	// alone sends a lone take through takebatch.lua too (a batch of one), so
	// that the contract suite can run through it; tests only.
	alone bool
	// generic sends a lone take of token buckets only in take.lua's single
	// layout, through the body's generic path, instead of the lone layout
	// (see loneArgs), so that tests can compare the two; tests only.
	generic bool
	mu      sync.Mutex
	slots   map[uint16]*takeSlot
}

// takeSlot is one slot's state, under takeBatcher.mu.
type takeSlot struct {
	busy  bool          // a call of the slot is in flight
	queue []*queuedTake // the takes waiting for it, in order
}

// queuedTake is one take waiting in a slot's queue, and then its answer.
type queuedTake struct {
	ctx   context.Context
	keys  []string
	args  []any // take.lua's single layout
	sent  bool  // taken off the queue into a call (under takeBatcher.mu)
	done  chan struct{}
	reply []int64
	err   error
}

func newTakeBatcher(r *Redis, max int) *takeBatcher {
	return &takeBatcher{r: r, max: max, slots: map[uint16]*takeSlot{}}
}

// do runs one take (take.lua in the single layout, committing) of slot and
// returns its reply; see takeBatcher. A take that ctx ends while it waits in
// the queue is never sent, and do returns ctx's error; one that ctx ends
// after it was sent may still apply, as a take whose round trip times out.
func (b *takeBatcher) do(ctx context.Context, slot uint16, keys []string, args []any) ([]int64, error) {
	if b.max <= 1 && !b.alone {
		return b.lone(ctx, keys, args)
	}
	b.mu.Lock()
	s := b.slots[slot]
	if s == nil {
		s = &takeSlot{}
		b.slots[slot] = s
	}
	if !s.busy {
		s.busy = true
		b.mu.Unlock()
		defer b.next(slot)
		if b.alone {
			q := &queuedTake{ctx: ctx, keys: keys, args: args, done: make(chan struct{})}
			b.send([]*queuedTake{q})
			return q.reply, q.err
		}
		return b.lone(ctx, keys, args)
	}
	q := &queuedTake{ctx: ctx, keys: keys, args: args, done: make(chan struct{})}
	s.queue = append(s.queue, q)
	b.mu.Unlock()
	select {
	case <-q.done:
		return q.reply, q.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !q.sent {
		for i, o := range s.queue {
			if o == q {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
	b.mu.Unlock()
	return nil, ctx.Err()
}

// next hands slot's queue, at most max takes of it, to a new call, or marks
// the slot idle when nothing waits.
func (b *takeBatcher) next(slot uint16) {
	b.mu.Lock()
	s := b.slots[slot]
	if len(s.queue) == 0 {
		s.busy = false
		b.mu.Unlock()
		return
	}
	n := min(len(s.queue), b.max)
	batch := make([]*queuedTake, n)
	copy(batch, s.queue)
	for _, q := range batch {
		q.sent = true
	}
	s.queue = append(s.queue[:0], s.queue[n:]...)
	b.mu.Unlock()
	go func() {
		defer b.next(slot)
		b.send(batch)
	}()
}

// send runs batch in one script call and answers each take. The call's
// deadline is the latest of the takes' (each caller still stops at its
// own); a take whose context ended before the call is answered with its
// error and not sent. When the call fails every take it carried gets its
// error: the script writes nothing before every take has run, so none of
// them applied (unless the failure was the reply's loss on its way back).
func (b *takeBatcher) send(batch []*queuedTake) {
	defer func() {
		if p := recover(); p != nil {
			for _, q := range batch {
				if q.reply == nil && q.err == nil {
					q.err = fmt.Errorf("panic in take batch: %v", p)
				}
			}
		}
		for _, q := range batch {
			close(q.done)
		}
	}()
	live := batch[:0:0]
	var deadline time.Time
	for _, q := range batch {
		if err := q.ctx.Err(); err != nil {
			q.err = err
			continue
		}
		live = append(live, q)
		if d, ok := q.ctx.Deadline(); !ok {
			deadline = time.Time{}.Add(1<<63 - 1)
		} else if d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	if deadline.Before(time.Time{}.Add(1<<63 - 1)) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if len(live) == 1 && !b.alone {
		q := live[0]
		q.reply, q.err = b.lone(ctx, q.keys, q.args)
		return
	}
	keys, args := batchArgs(live)
	nums, err := replyNumbers(b.r.call(ctx, b.r.takeBatch, keys, args...))
	if err == nil {
		err = splitNumbers(nums, live)
	}
	if err != nil {
		for _, q := range live {
			q.reply = nil
			q.err = err
		}
	}
}

// batchNumbers is takebatch.lua's reply as numbers (see its header):
// packed, each number the double the script packed (f, not nil); else the
// array's integers (i).
type batchNumbers struct {
	f []float64
	i []int64
}

func (n batchNumbers) len() int {
	if n.f != nil {
		return len(n.f)
	}
	return len(n.i)
}

// at is number k as an integer: a packed double cast toward zero, as Redis
// casts a Lua number of a reply (int64(x): the same conversion whichever
// form the script used).
func (n batchNumbers) at(k int) int64 {
	if n.f != nil {
		return int64(n.f[k])
	}
	return n.i[k]
}

// replyNumbers returns takebatch.lua's reply as its numbers: a string holds
// them packed (8 bytes each, the IEEE 754 double of the number,
// little-endian), an array as integers. Errors: cmd's, and errTakeReply
// for a string whose length is not a multiple of 8 or a reply of another
// type.
func replyNumbers(cmd *redis.Cmd) (batchNumbers, error) {
	v, err := cmd.Result()
	if err != nil {
		return batchNumbers{}, err
	}
	packed, ok := v.(string)
	if !ok {
		if _, ok := v.([]any); !ok {
			return batchNumbers{}, fmt.Errorf("%w: a reply of type %T", errTakeReply, v)
		}
		ints, err := cmd.Int64Slice()
		return batchNumbers{i: ints}, err
	}
	if len(packed)%8 != 0 {
		return batchNumbers{}, fmt.Errorf("%w: a packed reply of %d bytes", errTakeReply, len(packed))
	}
	f := make([]float64, len(packed)/8)
	for i := range f {
		b := packed[8*i : 8*i+8]
		u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		f[i] = math.Float64frombits(u)
	}
	return batchNumbers{f: f}, nil
}

// splitNumbers sets each take's reply (take.lua's: allowed 1, -1, 0, 0,
// then per bucket its remaining units and reset in µs, then per bucket its
// window start when one is a window counter; denied 0, the bucket index,
// too large, retry µs, then as allowed; voided -1) from nums,
// takebatch.lua's reply, which holds them in order, each allowed one
// without its -1, 0, 0. How many numbers follow a take's first comes from
// its ARGV (take.lua's single layout): 2 per bucket, 3 when a bucket is a
// window counter (windowEnd < 0), and in an allowed take 2 more per bucket
// when one is a sliding window (its statuses before the take, statusesIn).
// In a packed reply a run of token-bucket
// takes (runTokens) opens with 3 and its buckets' levels at now, and an
// allowed take of it is 2 alone: its reply is worked out here from those
// levels (runLevels). Errors: errTakeReply, when nums does not hold
// exactly the takes' replies (a script that does not match this build);
// the replies of the takes before the fault are then set, and the caller
// (send) answers every take with the error instead.
func splitNumbers(nums batchNumbers, takes []*queuedTake) error {
	at, total := 0, nums.len()
	var levels []float64 // the run's levels (code 3), after its allowed takes so far
	for i, q := range takes {
		n := (len(q.args) - 3) / 6
		if at < total && nums.f != nil && nums.f[at] == 3 {
			if at+1+n > total {
				return fmt.Errorf("%w: take %d of %d cut short", errTakeReply, i, len(takes))
			}
			levels = append(levels[:0], nums.f[at+1:at+1+n]...)
			at += 1 + n
		}
		if at >= total {
			return fmt.Errorf("%w: %d numbers for %d takes", errTakeReply, total, len(takes))
		}
		w, before := 2*n, 0 // before: the statuses before an allowed take (a sliding window among its buckets)
		for j := range n {
			if e, _ := q.args[3+6*j+4].(int64); e < 0 {
				w = 3 * n
				if e == windowSliding {
					before = 2 * n
				}
			}
		}
		switch nums.at(at) {
		case -1:
			q.reply, at = []int64{-1}, at+1
		case 2:
			if nums.f == nil || len(levels) != n || w != 2*n {
				return fmt.Errorf("%w: take %d of %d: an allowed take of a run without its levels", errTakeReply, i, len(takes))
			}
			q.reply, at = runLevels(levels, q.args), at+1
		case 1:
			w += before
			if at+1+w > total {
				return fmt.Errorf("%w: take %d of %d cut short", errTakeReply, i, len(takes))
			}
			r := make([]int64, 4+w)
			r[0], r[1] = 1, -1
			for k := range w {
				r[4+k] = nums.at(at + 1 + k)
			}
			q.reply, at = r, at+1+w
		case 0:
			if at+4+w > total {
				return fmt.Errorf("%w: take %d of %d cut short", errTakeReply, i, len(takes))
			}
			r := make([]int64, 4+w)
			for k := range r {
				r[k] = nums.at(at + k)
			}
			q.reply, at = r, at+4+w
		default:
			return fmt.Errorf("%w: take %d of %d opens with %d", errTakeReply, i, len(takes), nums.at(at))
		}
	}
	if at != total {
		return fmt.Errorf("%w: %d numbers past the last take's", errTakeReply, total-at)
	}
	return nil
}

// runLevels is the reply of an allowed take of a run of token buckets
// (takebatch.lua's runTokens), or of a lone take (take.lua's
// takeLoneRun), whose buckets' levels before it are levels, in order; it
// leaves in levels each level after the take. args is the
// take's ARGV in take.lua's single layout (int64 limits and costs). Each
// bucket's numbers are what takeTokens puts in its reply, by the same
// double arithmetic: the level minus the cost (the level a commit leaves:
// a bucket full again and deleted holds capacity, which that difference
// then equals), its units floored as the script floors them
// (scriptUnits), its reset wait(level, capacity, rate, per) (the script's
// is inlined from core.lua's wait, whose mirror this is), each cast to an
// integer as batchNumbers.at casts a packed number.
func runLevels(levels []float64, args []any) []int64 {
	r := make([]int64, 4+2*len(levels))
	r[0], r[1] = 1, -1
	for j := range levels {
		a := args[3+6*j:]
		capacity, rate, per := float64(a[0].(int64)), float64(a[1].(int64)), float64(a[2].(int64))
		level := levels[j] - float64(a[5].(int64))
		levels[j] = level
		r[4+2*j], r[5+2*j] = int64(scriptUnits(level)), int64(wait(level, capacity, rate, per))
	}
	return r
}

// scriptUnits is the remaining units takebatch.lua's token-bucket loops
// reply for level: level - level % 1 (Lua 5.1's x % 1 is x - floor(x)),
// or, outside (-2^63, 2^63) or NaN, take.lua's floorUnits (floor, at most
// the largest double below 2^63, at least -2^63).
func scriptUnits(level float64) float64 {
	u := level - (level - math.Floor(level))
	if u < 0x1p63 && u > -0x1p63 {
		return u
	}
	f := math.Floor(level)
	switch {
	case f >= 0x1p63:
		return 0x1p63 - 1024
	case f <= -0x1p63:
		return -0x1p63
	}
	return f
}

// lone runs one take alone, given in take.lua's single layout
// (committing): in the lone layout when every bucket is a token bucket
// (loneArgs), else as given. The reply is take.lua's either way. An
// allowed lone take's comes, where Redis has the struct library, as each
// bucket's level before the take, packed (n doubles): its numbers are
// worked out here by runLevels, the script's arithmetic, as for a take of
// a batch's run; where Redis has no struct (miniredis) it comes as each
// bucket's remaining units and reset (2n integers). Either way the four
// numbers every allowed reply opens with (1, -1, 0, 0) are put back.
// Errors: the call's; errTakeReply for a packed reply of another length.
func (b *takeBatcher) lone(ctx context.Context, keys []string, args []any) ([]int64, error) {
	if !b.generic {
		if l := loneArgs(args); l != nil {
			nums, err := replyNumbers(b.r.call(ctx, b.r.take, keys, l...))
			if err != nil {
				return nil, err
			}
			n := (len(args) - 3) / 6
			if nums.f != nil {
				if len(nums.f) != n {
					return nil, fmt.Errorf("%w: a lone take of %d buckets answered %d packed numbers", errTakeReply, n, len(nums.f))
				}
				return runLevels(nums.f, args), nil
			}
			if len(nums.i) == 2*n {
				return append([]int64{1, -1, 0, 0}, nums.i...), nil
			}
			return nums.i, nil
		}
	}
	return b.r.call(ctx, b.r.take, keys, args...).Int64Slice()
}

// loneArgs returns a committing take's ARGV in take.lua's single layout
// (now, "1", marker TTL, then 6 per bucket: its 5 limit ARGV and its cost)
// in the lone layout take.lua's fast path reads: its shape as one text,
// "L <marker TTL> <capacity> <rate> <per> ..." (the same from take to take
// of one kind, so Redis reads it once: take.lua's loneShapeOf), then the
// buckets' costs packed in one text (8 bytes each, the IEEE 754 double
// float64(cost) little-endian, as packUnits packs units: the doubles
// "text + 0" gave the script), then now when it is pinned (not ""); or
// nil when a bucket is not a token bucket (rate 0: an in-flight limit;
// windowEnd not 0: a quota or a window counter; see lua/core.lua kindOf),
// a cost is not an int64, the take has more than lua.LoneBuckets buckets,
// or it only checks. Redis makes 2 Lua
// strings (3 with a pinned now) for n buckets where the single layout
// makes 6n + 3.
func loneArgs(args []any) []any {
	if len(args) < 9 || args[1] != "1" || (len(args)-3)%6 != 0 {
		return nil
	}
	ttl, ok := args[2].(string)
	if !ok {
		return nil
	}
	n := (len(args) - 3) / 6
	if n > lua.LoneBuckets {
		return nil
	}
	shape := make([]byte, 0, 2+len(ttl)+24*n)
	shape = append(append(shape, "L "...), ttl...)
	costs := make([]byte, 0, 8*n)
	for j := range n {
		a := args[3+6*j : 9+6*j]
		c, ok1 := a[0].(int64)
		r, ok2 := a[1].(int64)
		p, ok3 := a[2].(int64)
		cost, ok4 := a[5].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || c <= 0 || r <= 0 || p <= 0 || a[3] != any(int64(0)) || a[4] != any(int64(0)) {
			return nil
		}
		shape = strconv.AppendInt(append(shape, ' '), c, 10)
		shape = strconv.AppendInt(append(shape, ' '), r, 10)
		shape = strconv.AppendInt(append(shape, ' '), p, 10)
		costs = binary.LittleEndian.AppendUint64(costs, math.Float64bits(float64(cost)))
	}
	out := []any{string(shape), string(costs)}
	if now, ok := args[0].(string); !ok || now != "" {
		out = append(out, args[0])
	}
	return out
}

// limitText is a limit's five ARGV as one text, as lua/core.lua's limitOf
// reads it: decimal integers separated by spaces.
func limitText(capacity, rate, per, windowStart, windowEnd int64) string {
	b := make([]byte, 0, 64)
	for i, v := range [5]int64{capacity, rate, per, windowStart, windowEnd} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(b)
}

// batchArgs returns the KEYS and ARGV of takebatch.lua for takes, each
// given in take.lua's single layout (now, '1', marker TTL, then 6 per
// bucket: its 5 limit ARGV and its cost): every distinct bucket key, limit
// and shape (marker TTL, epoch of its sets, and the keys and limits of the
// buckets) sent once; consecutive takes of one shape are one run, which
// sends its shape's index and its length once, then each take its request
// id (with sets: an id of NewRequestID's) and its costs (see the script's
// header). A take of an id of NewRequestID's form sends no marker key: the
// taken and voided sets of its id's epoch go at the end of KEYS, once per
// batch; any other id's marker key is sent (the batch reads it: a void
// leaves "v" there). Its numbers (counts, indexes, costs) go packed in
// one last ARGV (packNumbers): inlineBatchArgs is the layout before,
// which the tests send to the scripts of before.
func batchArgs(takes []*queuedTake) ([]string, []any) {
	keys, args := inlineBatchArgs(takes)
	return keys, packNumbers(args)
}

// inlineBatchArgs returns batchArgs's KEYS and its ARGV with each number
// an ARGV of its own (takebatch.lua of 957d14b to 03e3938): the counts
// and indexes ints, each take's costs int64s after its id; the texts
// (now, the layout's 'c', limits, marker TTLs, ids) strings.
func inlineBatchArgs(takes []*queuedTake) ([]string, []any) {
	var in interner
	var markers, sets []string // sets: per epoch, its taken set then its voided set
	var limits, shapes, entries []any
	var shape []byte
	prev, runAt := 0, 0
	for _, q := range takes {
		m, epoch, id := 0, 0, ""
		if q.args[2] != "0" {
			m = 1
			if taken, i, ok := takenSetOf(q.keys[0]); ok {
				id = i
				for e := 0; e < len(sets); e += 2 {
					if sets[e] == taken {
						epoch = e/2 + 1
						break
					}
				}
				if epoch == 0 {
					sets = append(sets, taken, voidedSetOf(taken))
					epoch = len(sets) / 2
				}
			} else {
				markers = append(markers, q.keys[0])
			}
		}
		n := (len(q.args) - 3) / 6
		shape = fmt.Appendf(shape[:0], "%v %d %d", q.args[2], epoch, n)
		at := len(shapes)
		shapes = append(shapes, q.args[2], epoch, n)
		for j := range n {
			k := in.key(q.keys[m+j])
			a := q.args[3+6*j:]
			l, added := in.limit(limitOfArgs(a))
			if added {
				limits = append(limits, limitText(a[0].(int64), a[1].(int64), a[2].(int64), a[3].(int64), a[4].(int64)))
			}
			shape = strconv.AppendInt(append(shape, ' '), int64(k), 10)
			shape = strconv.AppendInt(append(shape, ' '), int64(l), 10)
			shapes = append(shapes, k, l)
		}
		s, added := in.shape(shape)
		if !added {
			shapes = shapes[:at]
		}
		if s == prev {
			entries[runAt] = entries[runAt].(int) + 1
		} else {
			runAt, prev = len(entries)+1, s
			entries = append(entries, s, 1)
		}
		if epoch > 0 {
			entries = append(entries, id)
		}
		for j := range n {
			entries = append(entries, q.args[3+6*j+5])
		}
	}
	buckets := in.keys.items
	keys := make([]string, 0, len(buckets)+len(markers)+len(sets))
	keys = append(append(append(keys, buckets...), markers...), sets...)
	args := make([]any, 0, 7+len(limits)+len(shapes)+len(entries))
	args = append(args, takes[0].args[0], "c", len(takes), len(buckets), in.limits.len(), in.shapes.len(), len(sets)/2)
	args = append(args, limits...)
	args = append(args, shapes...)
	return keys, append(args, entries...)
}

// limitOfArgs reads a limit's five ARGV in take.lua's single layout (as
// appendLimit wrote them, int64s) for the interner.
func limitOfArgs(a []any) [5]int64 {
	var l [5]int64
	for i := range l {
		l[i] = a[i].(int64)
	}
	return l
}

// packNumbers returns args with its ints and int64s (every number of
// takebatch.lua's layout: its counts, indexes and costs; its texts are
// strings) taken out, in order, and appended as one last ARGV that holds
// them packed as packUnits packs units (an int's double is exact: they
// are counts and indexes). It reuses args's array.
func packNumbers(args []any) []any {
	packed := make([]byte, 0, 8*len(args))
	out := args[:0]
	for _, a := range args {
		var f float64
		switch v := a.(type) {
		case int:
			f = float64(v)
		case int64:
			f = float64(v)
		default:
			out = append(out, a)
			continue
		}
		packed = binary.LittleEndian.AppendUint64(packed, math.Float64bits(f))
	}
	return append(out, string(packed))
}
