package bucket

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// oldTakeBatchSource is takebatch.lua as an EVAL script (core.lua and
// take.lua inserted) at 957d14b, before a batch sent its takes in runs of
// one shape: the oracle of TestTakeBatchLayoutMatchesOld, sent with the
// KEYS and ARGV oldBatchArgs builds.
//
// Its hold is patched to keep an in-flight key's longer TTL, as
// core.lua's hold does since a shorter lease cut older holders short
// (TestShorterLeaseKeepsLongerHolders), and its denial to name the short
// bucket that waits longest, as take.lua's does since a 429 named the
// first short limit with another's wait: the oracle checks the layout.
//
//go:embed testdata/takebatch_957d14b.lua
var oldTakeBatchSource string

var oldTakeBatchScript = redis.NewScript(oldTakeBatchSource)

// oldBatchArgs is batchArgs as it was at 957d14b: every take sends the
// index of its shape, then its request id (with a taken set) and costs.
func oldBatchArgs(takes []*queuedTake) ([]string, []any) {
	keyOf := map[string]int{}
	limitOf := map[[5]any]int{}
	shapeOf := map[string]int{}
	var buckets, markers []string
	var limits, shapes, entries []any
	var shape []byte
	for _, q := range takes {
		m, taken, id := 0, 0, ""
		if q.args[2] != "0" {
			m = 1
			markers = append(markers, q.keys[0])
			var set string
			var ok bool
			if set, id, ok = takenSetOf(q.keys[0]); ok {
				k, seen := keyOf[set]
				if !seen {
					buckets = append(buckets, set)
					k = len(buckets)
					keyOf[set] = k
				}
				taken = k
			}
		}
		n := (len(q.args) - 3) / 6
		shape = fmt.Appendf(shape[:0], "%v %d %d", q.args[2], taken, n)
		at := len(shapes)
		shapes = append(shapes, q.args[2], taken, n)
		for j := range n {
			key := q.keys[m+j]
			k, ok := keyOf[key]
			if !ok {
				buckets = append(buckets, key)
				k = len(buckets)
				keyOf[key] = k
			}
			a := q.args[3+6*j:]
			spec := [5]any{a[0], a[1], a[2], a[3], a[4]}
			l, ok := limitOf[spec]
			if !ok {
				limits = append(limits, a[0], a[1], a[2], a[3], a[4])
				l = len(limitOf) + 1
				limitOf[spec] = l
			}
			shape = strconv.AppendInt(append(shape, ' '), int64(k), 10)
			shape = strconv.AppendInt(append(shape, ' '), int64(l), 10)
			shapes = append(shapes, k, l)
		}
		s, ok := shapeOf[string(shape)]
		if !ok {
			s = len(shapeOf) + 1
			shapeOf[string(shape)] = s
		} else {
			shapes = shapes[:at]
		}
		entries = append(entries, s)
		if taken > 0 {
			entries = append(entries, id)
		}
		for j := range n {
			entries = append(entries, q.args[3+6*j+5])
		}
	}
	keys := append(buckets, markers...)
	args := make([]any, 0, 6+len(limits)+len(shapes)+len(entries))
	args = append(args, takes[0].args[0], "c", len(takes), len(buckets), len(limitOf), len(shapeOf))
	args = append(args, limits...)
	args = append(args, shapes...)
	return keys, append(args, entries...)
}

// takeLayoutCase is a batch of takes over a layout case's keys and
// stored state (randomLayoutCase: values of every kind, garbage, markers
// and marker sets), plus take markers and taken sets of its own ids.
type takeLayoutCase struct {
	lc    layoutCase
	takes []takeLayoutEntry
}

type takeLayoutEntry struct {
	id    string
	keys  []int
	lims  []Limit
	costs []int64
}

// randomTakeLayoutCase draws up to 40 takes from a few templates (runs of
// one shape, as at concurrency 32, broken by others), each template's
// buckets mostly token buckets (the script's fast path) and sometimes a
// quota, window or in-flight limit (takeOne); ids of both forms, repeated,
// some voided (marker key and voided set) or taken before the batch;
// costs from 0 to beyond capacity,
// repeated or not.
func randomTakeLayoutCase(r *rand.Rand) takeLayoutCase {
	lc := randomLayoutCase(r)
	lc.entries = nil
	now := lc.now
	// Some token buckets written at a later instant than the batch's
	// (another node's clock, or Redis's, ahead), at levels around full: a
	// refill leaves them as they are, and a take of 0 at full deletes one
	// (runTokens then goes on from a missing key's state, not the stored one).
	for i := range 6 {
		if r.IntN(3) == 0 {
			level := []float64{0, 1, 5, 299.5, 1e6, 1e12}[r.IntN(6)]
			updated := now.Add(time.Duration(1+r.Int64N(1e6)) * time.Microsecond)
			lc.state[layoutKey("@", i)] = layoutStored{kind: "string", v: fmt.Sprintf("%.17g %d", level, updated.UnixMicro()), ttl: minStoredTTL + r.Int64N(1e7)}
		}
	}
	ids := []string{"", "a", "b", NewRequestID(now), NewRequestID(now), NewRequestID(now.Add(-20 * time.Second)), NewRequestID(now)}
	const nkeys = 6
	base := make([]Limit, nkeys)
	for i := range base {
		base[i] = randomLimit(r)
		switch r.IntN(10) {
		case 0:
			base[i] = Quota(1+r.Int64N(1e6), now.Add(-time.Hour), now.Add(time.Hour))
		case 1:
			base[i] = Window([]Algorithm{SlidingWindow, FixedWindow}[r.IntN(2)], 1+r.Int64N(1e4), time.Minute)
		case 2:
			base[i] = Slots(1+r.Int64N(4), time.Minute)
		}
	}
	type template struct {
		keys []int
		lims []Limit
	}
	var templates []template
	for range 1 + r.IntN(3) {
		var tp template
		used := map[int]bool{}
		for range 1 + r.IntN(4) {
			k := r.IntN(nkeys)
			if used[k] {
				continue
			}
			used[k] = true
			l := base[k]
			if r.IntN(10) == 0 {
				l = randomLimit(r)
			}
			tp.keys, tp.lims = append(tp.keys, k), append(tp.lims, l)
		}
		templates = append(templates, tp)
	}
	tc := takeLayoutCase{lc: lc}
	costs := []int64{0, 1, 7, 300}
	for len(tc.takes) < 40 {
		tp := templates[r.IntN(len(templates))]
		run := 1 + r.IntN(12)
		for range run {
			e := takeLayoutEntry{id: ids[r.IntN(len(ids))], keys: tp.keys, lims: tp.lims}
			for _, l := range tp.lims {
				c := costs[r.IntN(len(costs))]
				switch r.IntN(4) {
				case 0:
					c = r.Int64N(l.Capacity + 2)
				case 1:
					c = r.Int64N(l.Capacity/100 + 2)
				}
				if l.Concurrent {
					c = int64(r.IntN(2))
				}
				e.costs = append(e.costs, c)
			}
			tc.takes = append(tc.takes, e)
		}
	}
	if n := 1 + r.IntN(40); n < len(tc.takes) {
		tc.takes = tc.takes[:n]
	}
	for _, id := range ids[1:] {
		key := layoutKey("@", 0)
		switch r.IntN(5) {
		case 0: // voided: the marker key, and for an id of NewRequestID's its voided set too, as a void writes them
			lc.state[takeMarkerKey(key, id)] = layoutStored{kind: "string", v: "v", ttl: minStoredTTL + r.Int64N(1e7)}
			if epoch, ok := markerEpoch(id); ok {
				set := voidedSetKey(key, epoch)
				s := lc.state[set]
				s.kind, s.members, s.ttl = "set", append(s.members, id), 1+r.Int64N(1e7)
				lc.state[set] = s
			}
		case 1:
			lc.state[takeMarkerKey(key, id)] = layoutStored{kind: "string", v: "t", ttl: minStoredTTL + r.Int64N(1e7)}
		case 2:
			if epoch, ok := markerEpoch(id); ok {
				set := takenSetKey(key, epoch)
				s := lc.state[set]
				s.kind, s.members, s.ttl = "set", append(s.members, id), 1+r.Int64N(1e7)
				lc.state[set] = s
			}
		}
	}
	return tc
}

// runTakeLayoutCase writes tc's state under tag, runs its takes as one
// call (the old layout by EVAL of the oracle when old, else the store's
// send) and reads back every key of the tag. The reply is each take's,
// in order, or the call's failure.
func runTakeLayoutCase(t testing.TB, c *redis.Client, r *Redis, tc takeLayoutCase, tag string, old bool) layoutResult {
	t.Helper()
	ctx := context.Background()
	batch := make([]*queuedTake, len(tc.takes))
	for i, e := range tc.takes {
		items := make([]Item, len(e.keys))
		for j, k := range e.keys {
			items[j] = Item{Key: layoutKey(tag, k), Limit: e.lims[j], Cost: e.costs[j]}
		}
		k, a := r.takeArgs(e.id, items, nil, true)
		batch[i] = &queuedTake{ctx: ctx, keys: k, args: a, done: make(chan struct{})}
	}
	res := runLayoutCaseWith(t, c, tc.lc, tag, func() {
		if old {
			keys, args := oldBatchArgs(batch)
			replies, err := oldTakeBatchScript.Run(ctx, c, keys, args...).Slice()
			for i, q := range batch {
				if err != nil {
					q.err = err
					continue
				}
				q.reply, q.err = int64s(replies[i])
			}
		} else {
			r.takes.send(batch)
		}
	})
	for _, q := range batch {
		if q.err != nil {
			res.err = true
			continue
		}
		reply := q.reply
		if !old {
			reply = asOldTakeReply(reply, q.args)
		}
		res.reply = append(append(res.reply, reply...), -99) // -99 ends a take's reply
	}
	return res
}

// asOldTakeReply is reply, take.lua's to a take of args (its single
// layout), in the form the oracles' scripts reply: without the statuses
// before the take that an allowed take with a sliding window carries
// since redis28 (statusesIn; TestGroupDenialStatusesFromTheTake checks
// them against Memory). A reply of another length is returned as it is,
// for the comparison to report.
func asOldTakeReply(reply []int64, args []any) []int64 {
	n := (len(args) - 3) / 6
	if statusesIn(reply, n) == nil {
		return reply
	}
	for j := range n {
		if e, _ := args[3+6*j+4].(int64); e == windowSliding {
			return reply[:4+3*n]
		}
	}
	return reply
}

// compareTakeLayout runs tc through the old layout (the oracle) under tag
// "o" and the store's under tag "n", on the same server and instant, and
// reports every difference (see compareLayout).
func compareTakeLayout(t testing.TB, c *redis.Client, tc takeLayoutCase, exactTTL bool, where string) {
	t.Helper()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	now := tc.lc.now
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r.takes.alone = true // a batch of one goes through takebatch.lua too
	start := time.Now()
	want := runTakeLayoutCase(t, c, r, tc, "o", true)
	got := runTakeLayoutCase(t, c, r, tc, "n", false)
	diffLayout(t, got, want, exactTTL, start, where)
}

// TestTakeBatchLayoutMatchesOld runs random batches of takes
// (randomTakeLayoutCase) through takebatch.lua as the store sends it now
// (runs of one shape) and through the script and ARGV of 957d14b, kept as
// the oracle: every take's reply and every key (value, members, TTL) must
// agree, on miniredis and on a real redis-server.
func TestTakeBatchLayoutMatchesOld(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 6))
	var cases []takeLayoutCase
	for range 300 {
		cases = append(cases, randomTakeLayoutCase(rnd))
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		for i, tc := range cases {
			if !onMiniredis(i) {
				continue
			}
			compareTakeLayout(t, c, tc, true, fmt.Sprintf("case %d", i))
		}
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		for i, tc := range cases {
			compareTakeLayout(t, c, tc, false, fmt.Sprintf("case %d", i))
		}
	})
}

// FuzzTakeBatchLayout is TestTakeBatchLayoutMatchesOld driven by the
// fuzzer's seeds, on a real redis-server:
//
//	go test -run X -fuzz FuzzTakeBatchLayout -fuzztime 60s ./bucket/
func FuzzTakeBatchLayout(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(14), uint64(6))
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		compareTakeLayout(t, c, randomTakeLayoutCase(rand.New(rand.NewPCG(s1, s2))), false, fmt.Sprintf("seeds %d %d", s1, s2))
	})
}

// int64s reads one element of a batch reply of the old layout (the
// oracle's): a list of integers. Errors: errTakeReply for anything else.
func int64s(v any) ([]int64, error) {
	vs, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errTakeReply, v)
	}
	out := make([]int64, len(vs))
	for i, x := range vs {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T", errTakeReply, i, x)
		}
		out[i] = n
	}
	return out, nil
}
