package bucket

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// TestReconcileRunArgs: a call holding two reconciliations or more of ids
// of NewRequestID's form, one epoch, one shape (the same deltas on the same
// distinct keys, each a token bucket's or a quota's) goes in
// reconcile.lua's run layout (the marker set and the buckets in KEYS; the
// shape as one text opening "N ", the units packed, the ids, then now only
// when pinned); every other call of several entries keeps the batch layout.
func TestReconcileRunArgs(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	id1, id2 := NewRequestID(now), NewRequestID(now)
	epoch, _ := markerEpoch(id1)
	set := "llmguard:{t}::rcs:" + epoch
	tpm := Limit{Capacity: 500, Rate: 3, Per: time.Minute}
	rps := Limit{Capacity: 7, Rate: 7, Per: time.Second}
	quota := Quota(1000, now.Add(-time.Hour), now.Add(time.Hour))
	quotaText := fmt.Sprintf("1000 0 0 %d %d", now.Add(-time.Hour).UnixMicro(), now.Add(time.Hour).UnixMicro())
	packed := func(units ...int64) string {
		var b []byte
		for _, u := range units {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(u)))
		}
		return string(b)
	}
	d := func(key string, l Limit, units int64) Delta { return Delta{Key: key, Limit: l, Units: units} }
	type entry struct {
		id     string
		deltas []Delta
		mode   scriptMode
	}
	steps := []struct {
		name     string
		pinned   bool
		entries  []entry
		wantKeys []string
		want     []any // nil: the batch layout stays
	}{
		{name: "two entries, two token buckets", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, -100), d("k:{t}:b", rps, 3)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 5), d("k:{t}:b", rps, -1)}}},
			wantKeys: []string{set, "k:{t}:a", "k:{t}:b"},
			want:     []any{"N 600000;500 3 60000000 0 0;7 7 1000000 0 0", packed(-100, 3, 5, -1), id1, id2}},
		{name: "a quota, a zero delta left out of both, the same id twice, a pinned clock", pinned: true, entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 0), d("k:{t}:q", quota, 9)}},
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 0), d("k:{t}:q", quota, -4)}}},
			wantKeys: []string{set, "k:{t}:q"},
			want:     []any{"N 600000;" + quotaText, packed(9, -4), id1, id1, "1773144000000000"}},
		{name: "one entry (the lone layout)", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}}}},
		{name: "a zero delta in one entry only (two shapes)", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1), d("k:{t}:b", rps, 1)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1), d("k:{t}:b", rps, 0)}}}},
		{name: "two epochs (two sets)", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}},
			{id: NewRequestID(now.Add(-time.Minute)), mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}}}},
		{name: "an id of another form", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}},
			{id: "r1", mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}}}},
		{name: "a key twice", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1), d("k:{t}:a", tpm, -1)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1), d("k:{t}:a", tpm, -1)}}}},
		{name: "a reload between the entries", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", tpm, 1)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:a", rps, 1)}}}},
		{name: "an in-flight limit", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:c", Slots(2, time.Minute), -1)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:c", Slots(2, time.Minute), -1)}}}},
		{name: "a window counter", entries: []entry{
			{id: id1, mode: modeReconcile, deltas: []Delta{d("k:{t}:w", Window(SlidingWindow, 10, time.Minute), 1)}},
			{id: id2, mode: modeReconcile, deltas: []Delta{d("k:{t}:w", Window(SlidingWindow, 10, time.Minute), 1)}}}},
		{name: "voids", entries: []entry{
			{id: id1, mode: modeVoid, deltas: []Delta{d("k:{t}:a", tpm, -1)}},
			{id: id2, mode: modeVoid, deltas: []Delta{d("k:{t}:a", tpm, -1)}}}},
		{name: "refunds", entries: []entry{
			{mode: modeRefund, deltas: []Delta{d("k:{t}:a", tpm, -1)}},
			{mode: modeRefund, deltas: []Delta{d("k:{t}:a", tpm, -1)}}}},
	}
	for i, s := range steps {
		r := &Redis{dedupFor: "600000", voidFor: "60000"}
		if s.pinned {
			r.now = func() time.Time { return now }
		}
		c := r.newReconcileCall()
		for j, e := range s.entries {
			c.add(j, e.id, e.deltas, nil, e.mode)
		}
		keys, got := c.runArgs(r)
		if !reflect.DeepEqual(got, s.want) || s.want != nil && !reflect.DeepEqual(keys, s.wantKeys) {
			t.Errorf("step %d (%s): run layout %q %#v, want %q %#v", i, s.name, keys, got, s.wantKeys, s.want)
		}
		if len(s.entries) > 1 {
			if keys, args := c.callArgs(r); s.want != nil && !reflect.DeepEqual(args, s.want) || s.want == nil && !reflect.DeepEqual(args, c.args(r)) || len(keys) == 0 {
				t.Errorf("step %d (%s): callArgs sent %q %#v", i, s.name, keys, args)
			}
		}
	}
}

// randomRunCase draws a batch of reconciliations most of which fit the run
// layout: randomLoneCase's keys, stored values and limits, then 2 to 16
// entries of one shape (the deltas of one drawn entry, one on distinct
// token buckets and quotas when there is one: its keys and limits, each
// entry its own units) with ids of one epoch, some already in
// their set, some repeated within the batch; one case in four breaks the
// run (an entry of another shape, id or epoch, or a delta of zero units).
func randomRunCase(r *rand.Rand) layoutCase {
	lc := randomLoneCase(r)
	var proto *layoutEntry
	for i := range lc.entries { // the first entry that can make a run, else the first of mode r
		e := &lc.entries[i]
		if e.mode != modeReconcile {
			continue
		}
		fits, seen := true, map[int]bool{}
		for j, k := range e.keys {
			fits = fits && !seen[k] && !e.limits[j].Concurrent && !e.limits[j].IsWindow()
			seen[k] = true
		}
		if proto == nil || fits {
			proto = e
		}
		if fits {
			break
		}
	}
	if proto == nil {
		return lc
	}
	now := lc.now
	var ids []string
	entries := []layoutEntry{}
	for range 2 + r.IntN(15) {
		e := layoutEntry{mode: modeReconcile, id: NewRequestID(now), keys: proto.keys, limits: proto.limits}
		if len(ids) > 0 && r.IntN(8) == 0 { // the same id twice in one batch
			e.id = ids[r.IntN(len(ids))]
		}
		ids = append(ids, e.id)
		for range proto.keys {
			units := r.Int64N(2e4) - 1e4
			switch {
			case r.IntN(60) == 0:
				units = 0
			case r.IntN(20) == 0:
				units = 1 << r.IntN(62)
				if r.IntN(2) == 0 {
					units = -units
				}
			}
			e.units = append(e.units, units)
		}
		entries = append(entries, e)
	}
	if r.IntN(4) == 0 { // the run broken by an entry of another kind
		at := r.IntN(len(entries))
		entries = append(entries[:at], append([]layoutEntry{lc.entries[r.IntN(len(lc.entries))]}, entries[at:]...)...)
	}
	lc.entries = entries
	if epoch, ok := markerEpoch(ids[0]); ok && len(proto.keys) > 0 && r.IntN(3) == 0 { // ids already applied
		set := markerSetKey(layoutKey("@", proto.keys[0]), epoch)
		s := lc.state[set]
		if s.kind == "" || s.kind == "set" {
			s.kind, s.ttl = "set", 1+r.Int64N(1e7)
			for range 1 + r.IntN(3) {
				s.members = append(s.members, ids[r.IntN(len(ids))])
			}
			lc.state[set] = s
		}
	}
	return lc
}

// runBatchCase writes lc's state under tag and sends all its entries in one
// call: in the batch layout when generic, else as the store sends a call
// (callArgs); then reads back every key of the tag. The reply is the
// call's; n counts the calls that went in the run layout.
func runBatchCase(t testing.TB, c *redis.Client, lc layoutCase, tag string, generic bool, n *loneCounts) layoutResult {
	t.Helper()
	ctx := context.Background()
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return lc.now },
		DedupFor: time.Duration(goldenDedupFor) * time.Millisecond, VoidFor: time.Duration(goldenVoidFor) * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.rcGeneric = generic
	var res layoutResult
	stored := runLayoutCaseWith(t, c, lc, tag, func() {
		call := r.newReconcileCall()
		for i, e := range lc.entries {
			deltas := make([]Delta, len(e.keys))
			for j, k := range e.keys {
				deltas[j] = Delta{Key: layoutKey(tag, k), Limit: e.limits[j], Units: e.units[j]}
			}
			call.add(i, e.id, deltas, e.idx, e.mode)
		}
		if len(call.owners) == 0 {
			return
		}
		keys, args := call.callArgs(r)
		if !generic && n != nil {
			n.all++
			if _, run := call.runArgs(r); run != nil {
				n.lone++
			}
		}
		reply, err := r.call(ctx, r.reconcile, keys, args...).Int64Slice()
		if err != nil {
			res.err = true
			reply = []int64{-98}
		}
		res.reply = reply
	})
	res.keys = stored.keys
	if n != nil {
		n.markers += len(res.keys)
	}
	return res
}

// compareRun runs lc's reconciliations as one call in the batch layout
// (the oracle) under tag "o" and as the store sends it under tag "n", on
// the same server, and reports every difference (see diffLayout).
func compareRun(t testing.TB, c *redis.Client, lc layoutCase, exactTTL bool, n *loneCounts, where string) {
	t.Helper()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := runBatchCase(t, c, lc, "o", true, nil)
	got := runBatchCase(t, c, lc, "n", false, n)
	diffLayout(t, got, want, exactTTL, start, where)
}

// TestReconcileRunMatchesBatch runs random batches (randomRunCase) as the
// store sends them (the run layout when they fit it) and in reconcile.lua's
// batch layout: every reply and every key (bucket values, marker sets'
// members, TTLs) must agree, on miniredis (gopher-lua, by EVALSHA: the
// units decoded in Lua) and on a real redis-server (Lua 5.1, by FCALL:
// struct.unpack, and the library's caches lasting from call to call).
// Most calls must have gone in the run layout.
func TestReconcileRunMatchesBatch(t *testing.T) {
	rnd := rand.New(rand.NewPCG(18, 5))
	var cases []layoutCase
	for range 250 {
		cases = append(cases, randomRunCase(rnd))
	}
	layoutMatchesBatch(t, cases, "run", compareRun)
}

// FuzzReconcileRun is TestReconcileRunMatchesBatch driven by the fuzzer's
// seeds, on a real redis-server:
//
//	go test -run X -fuzz FuzzReconcileRun -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzReconcileRun(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(18), uint64(5))
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		compareRun(t, c, randomRunCase(rand.New(rand.NewPCG(s1, s2))), false, nil, fmt.Sprintf("seeds %d %d", s1, s2))
	})
}
