package bucket

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// oldReconcileSource is reconcile.lua as an EVAL script (core.lua
// inserted) at a112cdd, before its entries named their keys, limits and
// shapes by index: the oracle of TestReconcileLayoutMatchesOld, sent with
// the ARGV oldReconcileCall builds, as the store sent them then.
//
//go:embed testdata/reconcile_a112cdd.lua
var oldReconcileSource string

var oldReconcileScript = redis.NewScript(oldReconcileSource)

// oldReconcileCall is reconcileCall as it was at a112cdd: every entry
// sends its marker keys and bucket keys in KEYS, and per delta its limit's
// index and its units in ARGV.
type oldReconcileCall struct {
	now     string
	keys    []string
	limits  []any
	limitOf map[[5]int64]int
	entries []any
	owners  []int
}

func (c *oldReconcileCall) args(r *Redis) []any {
	args := make([]any, 0, 4+len(c.limits)+len(c.entries))
	args = append(args, c.now, r.dedupFor, r.voidFor, len(c.limitOf))
	args = append(args, c.limits...)
	return append(args, c.entries...)
}

func (c *oldReconcileCall) add(owner int, requestID string, deltas []Delta, idx []int, mode scriptMode) {
	n := len(deltas)
	if idx != nil {
		n = len(idx)
	}
	at := func(j int) Delta {
		if idx != nil {
			return deltas[idx[j]]
		}
		return deltas[j]
	}
	count := 0
	for j := range n {
		if at(j).Units != 0 {
			count++
		}
	}
	tag := "n"
	switch {
	case mode == modeVoid:
		tag = "v"
		c.keys = append(c.keys, takeMarkerKey(at(0).Key, requestID))
		if epoch, ok := markerEpoch(requestID); ok {
			tag = "w"
			c.keys = append(c.keys, takenSetKey(at(0).Key, epoch))
		}
	case count == 0:
		return
	case mode == modeReconcile && requestID != "":
		tag = "r"
		if epoch, ok := markerEpoch(requestID); ok {
			tag = "h"
			c.keys = append(c.keys, markerSetKey(at(0).Key, epoch))
		} else {
			c.keys = append(c.keys, markerKey(at(0).Key, requestID))
		}
	}
	c.owners = append(c.owners, owner)
	c.entries = append(c.entries, tag)
	if tag == "h" || tag == "w" {
		c.entries = append(c.entries, requestID)
	}
	c.entries = append(c.entries, count)
	for j := range n {
		dl := at(j)
		if dl.Units == 0 {
			continue
		}
		c.keys = append(c.keys, dl.Key)
		a := limitArgs(dl.Limit)
		i, ok := c.limitOf[a]
		if !ok {
			c.limits = append(c.limits, limitText(a[0], a[1], a[2], a[3], a[4]))
			i = len(c.limitOf) + 1
			c.limitOf[a] = i
		}
		c.entries = append(c.entries, i, dl.Units)
	}
}

// layoutEntry is one element of a layout case: a ReconcileBatch element
// as add receives it, its keys named by index (layoutKey renders them).
type layoutEntry struct {
	mode   scriptMode
	id     string
	keys   []int // the bucket key of each delta
	limits []Limit
	units  []int64
	idx    []int // the deltas add sends (nil: all), as a cluster's slot group
}

// layoutStored is a key's value before a case: a string, a set's or a
// sorted set's members (with scores), and its TTL in ms (0: none).
type layoutStored struct {
	kind    string // "string", "set" or "zset"
	v       string
	members []string
	scores  []float64
	ttl     int64
}

type layoutCase struct {
	now     time.Time
	state   map[string]layoutStored // key name with the tag "@"
	entries []layoutEntry
}

// layoutKey is bucket key i of a case in the hash tag tag.
func layoutKey(tag string, i int) string { return fmt.Sprintf("lay:{%s}:k%d", tag, i) }

// randomLayoutCase draws a batch of reconciliations, voids and refunds
// over six keys of every kind (token buckets, quotas, sliding and fixed
// window counters, in-flight limits), with repeated keys and ids, ids of
// both forms, deltas of zero units, limits that change between entries,
// keys that hold another kind's value, markers set before the batch and
// slot groups (idx) that send only some deltas.
func randomLayoutCase(r *rand.Rand) layoutCase {
	now := t0.Add(time.Duration(r.Int64N(1e12)) * time.Microsecond)
	per := []time.Duration{time.Second, time.Minute, time.Hour}[r.IntN(3)]
	perUS := int64(per / time.Microsecond)
	cur := now.UnixMicro() / perUS * perUS
	start := now.Add(-time.Duration(r.Int64N(int64(24*time.Hour/time.Microsecond))) * time.Microsecond)
	limitFor := func(kind int) Limit {
		switch kind {
		case 1:
			l := Quota(1+r.Int64N(1e6), start, start.Add(24*time.Hour))
			if r.IntN(8) == 0 {
				l = Quota(1+r.Int64N(1e6), start.Add(24*time.Hour), start.Add(48*time.Hour))
			}
			return l
		case 2, 3:
			l := Window([]Algorithm{SlidingWindow, FixedWindow}[kind-2], 1+r.Int64N(1e4), per)
			switch r.IntN(4) {
			case 0:
				l.WindowStart = time.UnixMicro(cur)
			case 1:
				l.WindowStart = time.UnixMicro(cur - perUS)
			case 2:
				l.WindowStart = time.UnixMicro(cur - 2*perUS)
			}
			return l
		case 4:
			return Slots(1+r.Int64N(4), time.Minute)
		}
		return randomLimit(r)
	}
	const nkeys = 6
	kinds := make([]int, nkeys) // each key's usual limit kind
	base := make([]Limit, nkeys)
	for i := range kinds {
		kinds[i] = r.IntN(5)
		base[i] = limitFor(kinds[i])
	}
	ids := []string{"", "a", "b", NewRequestID(now), NewRequestID(now), NewRequestID(now.Add(-20 * time.Second))}
	ids = append(ids, ids[3]+"/shadow")
	lc := layoutCase{now: now, state: map[string]layoutStored{}}
	ttl := func() int64 {
		if r.IntN(5) == 0 {
			return 0
		}
		return minStoredTTL + r.Int64N(1e7)
	}
	for i := range nkeys {
		key := layoutKey("@", i)
		kind := kinds[i]
		if r.IntN(6) == 0 {
			kind = r.IntN(5) // another kind's value
		}
		switch r.IntN(4) {
		case 0: // missing
			continue
		case 1:
			if r.IntN(3) == 0 {
				lc.state[key] = layoutStored{kind: "string", v: "garbage", ttl: ttl()}
				continue
			}
		}
		switch kind {
		case 0:
			level := (r.Float64()*2 - 0.5) * 1e6
			updated := now.Add(-time.Duration(r.Int64N(int64(2*time.Hour/time.Microsecond))) * time.Microsecond)
			lc.state[key] = layoutStored{kind: "string", v: fmt.Sprintf("%.17g %d", level, updated.UnixMicro()), ttl: ttl()}
		case 1:
			window := start.Add(time.Duration(r.IntN(3)-1) * 24 * time.Hour)
			lc.state[key] = layoutStored{kind: "string", v: fmt.Sprintf("q %d %d", r.Int64N(2e6), window.UnixMicro()), ttl: ttl()}
		case 2, 3:
			lc.state[key] = layoutStored{kind: "string", v: fmt.Sprintf("w %d %d %d", r.Int64N(2e4), r.Int64N(2e4), cur-int64(r.IntN(3))*perUS), ttl: ttl()}
		case 4:
			s := layoutStored{kind: "zset", ttl: ttl()}
			for _, id := range ids[1:] {
				if r.IntN(2) == 0 {
					s.members = append(s.members, id)
					s.scores = append(s.scores, float64(now.UnixMicro()+r.Int64N(2e8)-1e8))
				}
			}
			if len(s.members) > 0 {
				lc.state[key] = s
			}
		}
	}
	for range 1 + r.IntN(40) {
		e := layoutEntry{mode: []scriptMode{modeReconcile, modeReconcile, modeReconcile, modeVoid, modeRefund}[r.IntN(5)], id: ids[r.IntN(len(ids))]}
		if e.mode == modeVoid && e.id == "" {
			e.id = ids[3]
		}
		n := 1 + r.IntN(4)
		used := map[int]bool{}
		for range n {
			k := r.IntN(nkeys)
			if e.mode == modeVoid && used[k] { // a void's keys are distinct, as a take's
				continue
			}
			used[k] = true
			l := base[k]
			if r.IntN(12) == 0 { // a reload, or another kind's limit on the key
				l = limitFor(r.IntN(5))
			}
			units := r.Int64N(2e4) - 1e4
			switch {
			case r.IntN(8) == 0:
				units = 0
			case e.mode == modeVoid:
				units = -r.Int64N(1e4)
			case l.Concurrent:
				units = int64(r.IntN(3) - 1)
			}
			e.keys, e.limits, e.units = append(e.keys, k), append(e.limits, l), append(e.units, units)
		}
		if len(e.keys) > 1 && r.IntN(6) == 0 {
			for j := range e.keys {
				if r.IntN(2) == 0 {
					e.idx = append(e.idx, j)
				}
			}
			if len(e.idx) == 0 {
				e.idx = []int{0}
			}
		}
		lc.entries = append(lc.entries, e)
		if e.id == "" || r.IntN(5) != 0 {
			continue
		}
		first := e.keys[0]
		if e.idx != nil {
			first = e.keys[e.idx[0]]
		}
		key := layoutKey("@", first)
		if epoch, ok := markerEpoch(e.id); ok { // a marker set before the batch
			set := markerSetKey(key, epoch)
			if r.IntN(2) == 0 {
				set = takenSetKey(key, epoch)
			}
			s := lc.state[set]
			s.kind, s.members, s.ttl = "set", append(s.members, e.id), ttl()
			lc.state[set] = s
			continue
		}
		if r.IntN(2) == 0 {
			lc.state[markerKey(key, e.id)] = layoutStored{kind: "string", v: "1", ttl: ttl()}
		} else {
			lc.state[takeMarkerKey(key, e.id)] = layoutStored{kind: "string", v: []string{"t", "v"}[r.IntN(2)], ttl: ttl()}
		}
	}
	return lc
}

// layoutResult is what a run of a case left: the reply (or the error's
// presence) and every key of its tag, by its name with the tag "@": type,
// value and TTL (ms).
type layoutResult struct {
	reply []int64
	err   bool
	keys  map[string]layoutStored
}

// runLayoutCase writes lc's state under tag, runs its entries as one
// call (the old layout by EVAL of the oracle when old, else the store's
// call) and reads back every key of the tag.
func runLayoutCase(t testing.TB, c *redis.Client, r *Redis, lc layoutCase, tag string, old bool) layoutResult {
	t.Helper()
	ctx := context.Background()
	var res layoutResult
	stored := runLayoutCaseWith(t, c, lc, tag, func() {
		var keys []string
		var args []any
		newCall, oldCall := r.newReconcileCall(), &oldReconcileCall{now: r.nowArg(), limitOf: map[[5]int64]int{}}
		for j, e := range lc.entries {
			deltas := make([]Delta, len(e.keys))
			for i, k := range e.keys {
				deltas[i] = Delta{Key: layoutKey(tag, k), Limit: e.limits[i], Units: e.units[i]}
			}
			if old {
				oldCall.add(j, e.id, deltas, e.idx, e.mode)
			} else {
				newCall.add(j, e.id, deltas, e.idx, e.mode)
			}
		}
		if old {
			keys, args = oldCall.keys, oldCall.args(r)
		} else {
			keys, args = newCall.keys(), newCall.args(r)
		}
		if len(keys) > 0 {
			var cmd *redis.Cmd
			if old {
				cmd = oldReconcileScript.Run(ctx, c, keys, args...)
			} else {
				cmd = r.call(ctx, r.reconcile, keys, args...)
			}
			reply, err := cmd.Int64Slice()
			res.reply, res.err = reply, err != nil
			if old && err == nil {
				oldVoidedSets(t, c, r, lc, tag)
			}
		}
	})
	res.keys = stored.keys
	return res
}

// oldVoidedSets adds to a run of the old layout what the store's adds
// since the voided sets: the void of an id of NewRequestID's (mode 'w')
// makes the id a member of its epoch's voided set in its first delta's
// slot, living the void window past its last write.
func oldVoidedSets(t testing.TB, c *redis.Client, r *Redis, lc layoutCase, tag string) {
	t.Helper()
	ctx := context.Background()
	for _, e := range lc.entries {
		epoch, ok := markerEpoch(e.id)
		if e.mode != modeVoid || !ok {
			continue
		}
		first := e.keys[0]
		if e.idx != nil {
			first = e.keys[e.idx[0]]
		}
		set := voidedSetKey(layoutKey(tag, first), epoch)
		ms, _ := strconv.ParseInt(r.voidFor, 10, 64)
		if err := c.SAdd(ctx, set, e.id).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpire(ctx, set, time.Duration(ms)*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// runLayoutCaseWith writes lc's state under tag, calls run, and reads
// back every key of the tag (type, value, members, TTL), by its name with
// the tag "@": the buckets ("lay:{<tag>}…") and the markers, marker keys
// and sets ("llmguard:{<tag>}::…").
func runLayoutCaseWith(t testing.TB, c *redis.Client, lc layoutCase, tag string, run func()) layoutResult {
	t.Helper()
	ctx := context.Background()
	for k, v := range lc.state {
		k = strings.Replace(k, "{@}", "{"+tag+"}", 1)
		var err error
		switch v.kind {
		case "string":
			err = c.Set(ctx, k, v.v, 0).Err()
		case "set":
			err = c.SAdd(ctx, k, v.members).Err()
		case "zset":
			for i, m := range v.members {
				if err == nil {
					err = c.ZAdd(ctx, k, redis.Z{Score: v.scores[i], Member: m}).Err()
				}
			}
		}
		if err == nil && v.ttl > 0 {
			err = c.PExpire(ctx, k, time.Duration(v.ttl)*time.Millisecond).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run()
	var res layoutResult
	res.keys = map[string]layoutStored{}
	stored, err := c.Keys(ctx, "lay:{"+tag+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	markers, err := c.Keys(ctx, "llmguard:{"+tag+"}*").Result() // marker keys and sets (markerIn)
	if err != nil {
		t.Fatal(err)
	}
	stored = append(stored, markers...)
	for _, k := range stored {
		var v layoutStored
		v.kind = c.Type(ctx, k).Val()
		switch v.kind {
		case "string":
			v.v = c.Get(ctx, k).Val()
		case "set":
			v.members = c.SMembers(ctx, k).Val()
			slices.Sort(v.members)
		case "zset":
			for _, z := range c.ZRangeWithScores(ctx, k, 0, -1).Val() {
				v.members = append(v.members, z.Member.(string))
				v.scores = append(v.scores, z.Score)
			}
		}
		v.ttl = c.PTTL(ctx, k).Val().Milliseconds()
		res.keys[strings.Replace(k, "{"+tag+"}", "{@}", 1)] = v
	}
	return res
}

// compareLayout runs lc through the old layout (the oracle) under tag
// "o" and the store's under tag "n", on the same server and instant, and
// reports every difference: the reply, whether the script failed, every
// key's type, value, members and TTL. TTLs agree exactly on miniredis
// (they do not run down); on redis-server a key's two TTLs may differ by
// the milliseconds between the two writes of the state.
func compareLayout(t testing.TB, c *redis.Client, lc layoutCase, exactTTL bool, where string) {
	t.Helper()
	ctx := context.Background()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	now := lc.now
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now },
		DedupFor: time.Duration(goldenDedupFor) * time.Millisecond, VoidFor: time.Duration(goldenVoidFor) * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := runLayoutCase(t, c, r, lc, "o", true)
	got := runLayoutCase(t, c, r, lc, "n", false)
	got.reply = asOldReply(got.reply)
	diffLayout(t, got, want, exactTTL, start, where)
}

// asOldReply is a reply of reconcile.lua as the oracles (scripts before
// period14) gave it: they reply 1 where this one replies 2 (an entry
// applied, a quota's delta of it applying to nothing, the period moved
// on), and agree otherwise. TestReconcileBatchGolden's model checks where
// the 2s are. (Reconcile replies only: a take's reply holds 2s of its own.)
func asOldReply(reply []int64) []int64 {
	out := slices.Clone(reply)
	for i, v := range out {
		if v == 2 {
			out[i] = 1
		}
	}
	return out
}

// diffLayout reports every difference between a run of the store's
// layout (got) and of the oracle (want): see compareLayout.
func diffLayout(t testing.TB, got, want layoutResult, exactTTL bool, start time.Time, where string) {
	t.Helper()
	slack := int64(0)
	if !exactTTL {
		slack = time.Since(start).Milliseconds() + 1
	}
	if fmt.Sprint(got.reply, got.err) != fmt.Sprint(want.reply, want.err) {
		t.Errorf("%s: reply %v (failed %v), the old layout's %v (failed %v)", where, got.reply, got.err, want.reply, want.err)
	}
	for k, w := range want.keys {
		g, ok := got.keys[k]
		if !ok {
			t.Errorf("%s: %s: missing, the old layout left %+v", where, k, w)
			continue
		}
		gt, wt := g.ttl, w.ttl
		g.ttl, w.ttl = 0, 0
		if fmt.Sprint(g) != fmt.Sprint(w) || (gt < 0) != (wt < 0) || gt-wt > slack || wt-gt > slack {
			t.Errorf("%s: %s: %+v ttl %d, the old layout's %+v ttl %d", where, k, g, gt, w, wt)
		}
	}
	for k, g := range got.keys {
		if _, ok := want.keys[k]; !ok {
			t.Errorf("%s: %s: %+v, the old layout left none", where, k, g)
		}
	}
}

// TestReconcileLayoutMatchesOld runs random batches (randomLayoutCase)
// through reconcile.lua as the store sends it now (distinct keys, limits
// and shapes named by index) and through the script and ARGV of a112cdd,
// kept as the oracle: every reply (asOldReply: a 2 read as 1) and every key (value, members, TTL) must
// agree, on miniredis (gopher-lua, by EVALSHA) and on a real redis-server
// (Lua 5.1, by FCALL).
func TestReconcileLayoutMatchesOld(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 5))
	var cases []layoutCase
	for range 300 {
		cases = append(cases, randomLayoutCase(rnd))
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		for i, lc := range cases {
			if !onMiniredis(i) {
				continue
			}
			compareLayout(t, c, lc, true, fmt.Sprintf("case %d", i))
		}
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		for i, lc := range cases {
			compareLayout(t, c, lc, false, fmt.Sprintf("case %d", i))
		}
	})
}

// FuzzReconcileLayout is TestReconcileLayoutMatchesOld driven by the
// fuzzer's seeds, on a real redis-server:
//
//	go test -run X -fuzz FuzzReconcileLayout -fuzztime 60s ./bucket/
func FuzzReconcileLayout(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(14), uint64(5))
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		compareLayout(t, c, randomLayoutCase(rand.New(rand.NewPCG(s1, s2))), false, fmt.Sprintf("seeds %d %d", s1, s2))
	})
}

// BenchmarkReconcileCallArgs builds the KEYS and ARGV of a batch of 32
// reconciliations (two deltas and an id of NewRequestID's form each, as
// TestCallgrindScripts sends them) in the store's layout ("now") and in
// a112cdd's ("old"): the Go side's share of the change, per batch.
func BenchmarkReconcileCallArgs(b *testing.B) {
	r, err := NewRedis(RedisOptions{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})})
	if err != nil {
		b.Fatal(err)
	}
	limits := []Limit{{Capacity: 1e9, Rate: 1e9, Per: time.Second}, {Capacity: 1e6, Rate: 1e6, Per: time.Second}}
	batch := make([]Reconciliation, 32)
	for i := range batch {
		batch[i] = Reconciliation{RequestID: NewRequestID(t0), Deltas: []Delta{
			{Key: "llmguard:{t}:user:alice", Limit: limits[0], Units: -100},
			{Key: "llmguard:{t}:tenant:acme", Limit: limits[1], Units: 3}}}
	}
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := r.newReconcileCall()
			for j, rc := range batch {
				c.add(j, rc.RequestID, rc.Deltas, nil, modeReconcile)
			}
			_ = c.args(r)
		}
	})
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := &oldReconcileCall{now: r.nowArg(), limitOf: map[[5]int64]int{}}
			for j, rc := range batch {
				c.add(j, rc.RequestID, rc.Deltas, nil, modeReconcile)
			}
			_ = c.args(r)
		}
	})
}
