package bucket

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// TestReconcileLoneArgs: a call holding one reconciliation of an id of
// NewRequestID's form whose deltas are on distinct keys, each a token
// bucket's or a quota's, goes in reconcile.lua's lone layout (the marker
// set and the buckets in KEYS; the shape as one text, the id, the units,
// then now only when pinned); every other call keeps the batch layout (or
// the run layout, TestReconcileRunArgs).
func TestReconcileLoneArgs(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	id := NewRequestID(now)
	epoch, _ := markerEpoch(id)
	set := "llmguard:{t}::rcs:" + epoch
	tpm := Limit{Capacity: 500, Rate: 3, Per: time.Minute}
	rps := Limit{Capacity: 7, Rate: 7, Per: time.Second}
	quota := Quota(1000, now.Add(-time.Hour), now.Add(time.Hour))
	quotaText := fmt.Sprintf("1000 0 0 %d %d", now.Add(-time.Hour).UnixMicro(), now.Add(time.Hour).UnixMicro())
	type entry struct {
		id     string
		deltas []Delta
		idx    []int
		mode   scriptMode
	}
	steps := []struct {
		name     string
		pinned   bool
		entries  []entry
		wantKeys []string
		want     []any // nil: the batch layout stays
	}{
		{name: "two token buckets", entries: []entry{{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: -100}, {Key: "k:{t}:b", Limit: rps, Units: 3}}}},
			wantKeys: []string{set, "k:{t}:a", "k:{t}:b"}, want: []any{"R 600000;500 3 60000000 0 0;7 7 1000000 0 0", id, int64(-100), int64(3)}},
		{name: "a quota, a zero delta left out, a pinned clock", pinned: true,
			entries:  []entry{{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 0}, {Key: "k:{t}:q", Limit: quota, Units: 9}}}},
			wantKeys: []string{set, "k:{t}:q"}, want: []any{"R 600000;" + quotaText, id, int64(9), "1773144000000000"}},
		{name: "a slot group (idx)", entries: []entry{{id: id, mode: modeReconcile, idx: []int{1}, deltas: []Delta{{Key: "k:{u}:a", Limit: tpm, Units: 4}, {Key: "k:{t}:b", Limit: rps, Units: 3}}}},
			wantKeys: []string{set, "k:{t}:b"}, want: []any{"R 600000;7 7 1000000 0 0", id, int64(3)}},
		{name: "two entries", entries: []entry{
			{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 1}}},
			{id: NewRequestID(now), mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 1}}}}},
		{name: "a key twice", entries: []entry{{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 1}, {Key: "k:{t}:a", Limit: tpm, Units: -1}}}}},
		{name: "an id of another form", entries: []entry{{id: "r1", mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 1}}}}},
		{name: "no id", entries: []entry{{mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: 1}}}}},
		{name: "a void", entries: []entry{{id: id, mode: modeVoid, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: -1}}}}},
		{name: "a refund", entries: []entry{{mode: modeRefund, deltas: []Delta{{Key: "k:{t}:a", Limit: tpm, Units: -1}}}}},
		{name: "an in-flight limit", entries: []entry{{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:c", Limit: Slots(2, time.Minute), Units: -1}}}}},
		{name: "a window counter", entries: []entry{{id: id, mode: modeReconcile, deltas: []Delta{{Key: "k:{t}:w", Limit: Window(SlidingWindow, 10, time.Minute), Units: 1}}}}},
		{name: "more deltas than loneMaxDeltas", entries: []entry{{id: id, mode: modeReconcile, deltas: func() []Delta {
			var d []Delta
			for i := range loneMaxDeltas + 1 {
				d = append(d, Delta{Key: fmt.Sprintf("k:{t}:%d", i), Limit: tpm, Units: 1})
			}
			return d
		}()}}},
	}
	for i, s := range steps {
		r := &Redis{dedupFor: "600000", voidFor: "60000"}
		if s.pinned {
			r.now = func() time.Time { return now }
		}
		c := r.newReconcileCall()
		for j, e := range s.entries {
			c.add(j, e.id, e.deltas, e.idx, e.mode)
		}
		keys, got := c.loneArgs(r)
		if !reflect.DeepEqual(got, s.want) || s.want != nil && !reflect.DeepEqual(keys, s.wantKeys) {
			t.Errorf("step %d (%s): lone layout %q %#v, want %q %#v", i, s.name, keys, got, s.wantKeys, s.want)
		}
		other := c.args(r) // a call that does not fit the lone layout: the run layout's (runArgs) when it fits that, else the batch's
		if _, run := c.runArgs(r); run != nil {
			other = run
		}
		if keys, args := c.callArgs(r); s.want != nil && !reflect.DeepEqual(args, s.want) || s.want == nil && !reflect.DeepEqual(args, other) || len(keys) == 0 {
			t.Errorf("step %d (%s): callArgs sent %q %#v", i, s.name, keys, args)
		}
	}
}

// randomLoneCase draws a timeline of reconciliations sent one by one, each
// alone (a call of one entry), most of them fit for the lone layout (an id
// of NewRequestID's form, deltas on distinct token buckets and quotas),
// the rest not (another id, a void or a refund, a key twice, a window
// counter or an in-flight limit): over six keys whose stored values are
// of every kind (randomLayoutCase's, then token-bucket values at the
// edges of the lone path's '%d' text, loneEdgeLevels, and quotas of past,
// current and later windows), with ids retried, ids already in their
// epoch's set, a marker set that holds a string (the SADD fails), deltas
// of zero units, huge units, reloaded limits and slot groups (idx).
func randomLoneCase(r *rand.Rand) layoutCase {
	lc := randomLayoutCase(r)
	now := lc.now
	window := func() (time.Time, time.Time) {
		from := now.Add(-time.Duration(r.Int64N(int64(3*time.Hour/time.Microsecond))) * time.Microsecond)
		if r.IntN(6) == 0 { // a later period than the one stored, or a past one
			from = from.Add(time.Duration(r.IntN(3)-1) * 2 * time.Hour)
		}
		return from, from.Add(2 * time.Hour)
	}
	limitFor := func() Limit {
		switch r.IntN(12) {
		case 0, 1, 2:
			from, to := window()
			return Quota(1+r.Int64N(1e6), from, to)
		case 3:
			return Window([]Algorithm{SlidingWindow, FixedWindow}[r.IntN(2)], 1+r.Int64N(1e4), time.Minute)
		case 4:
			return Slots(1+r.Int64N(4), time.Minute)
		}
		return randomLimit(r)
	}
	const nkeys = 6
	base := make([]Limit, nkeys)
	for i := range base {
		base[i] = limitFor()
	}
	for i := range nkeys {
		key := layoutKey("@", i)
		switch r.IntN(5) {
		case 0: // randomLayoutCase's value (any kind, garbage, missing)
		case 1:
			lc.state[key] = layoutStored{kind: "string", v: loneEdgeLevels[r.IntN(len(loneEdgeLevels))], ttl: minStoredTTL + r.Int64N(1e7)}
		case 2:
			from, to := window()
			w := []time.Time{from.Add(-time.Hour), from, from.Add(time.Hour), to}[r.IntN(4)]
			lc.state[key] = layoutStored{kind: "string", v: fmt.Sprintf("q %d %d", r.Int64N(2e6), w.UnixMicro()), ttl: minStoredTTL + r.Int64N(1e7)}
		default:
			capacity := float64(base[i].Capacity)
			level := (r.Float64()*1.5 - 0.5) * capacity
			if r.IntN(3) == 0 {
				level = float64(int64(level))
			}
			updated := now.Add(time.Duration(r.Int64N(int64(2*time.Hour/time.Microsecond))-int64(time.Hour/time.Microsecond)*3/2) * time.Microsecond)
			lc.state[key] = layoutStored{kind: "string", v: fmt.Sprintf("%.17g %d", level, updated.UnixMicro()), ttl: minStoredTTL + r.Int64N(1e7)}
		}
	}
	ids := []string{NewRequestID(now), NewRequestID(now), NewRequestID(now.Add(-20 * time.Second)), "a", ""}
	lc.entries = nil
	for range 1 + r.IntN(6) {
		e := layoutEntry{mode: modeReconcile, id: NewRequestID(now)}
		switch r.IntN(20) {
		case 0:
			e.mode = modeVoid
		case 1:
			e.mode, e.id = modeRefund, ""
		case 2, 3, 4:
			e.id = ids[r.IntN(len(ids))]
		case 5, 6:
			if len(lc.entries) > 0 { // a retry
				e.id = lc.entries[r.IntN(len(lc.entries))].id
			}
		}
		if e.mode == modeVoid && e.id == "" {
			e.id = ids[0]
		}
		used := map[int]bool{}
		for range 1 + r.IntN(4) {
			k := r.IntN(nkeys)
			if used[k] && (e.mode == modeVoid || r.IntN(8) != 0) {
				continue
			}
			used[k] = true
			l := base[k]
			if r.IntN(10) == 0 { // a reload
				l = limitFor()
			}
			units := r.Int64N(2e4) - 1e4
			switch {
			case r.IntN(10) == 0:
				units = 0
			case r.IntN(20) == 0:
				units = 1 << r.IntN(62)
				if r.IntN(2) == 0 {
					units = -units
				}
			case e.mode == modeVoid:
				units = -r.Int64N(1e4)
			case l.Concurrent:
				units = int64(r.IntN(3) - 1)
			}
			e.keys, e.limits, e.units = append(e.keys, k), append(e.limits, l), append(e.units, units)
		}
		if len(e.keys) > 1 && r.IntN(8) == 0 {
			e.idx = []int{r.IntN(len(e.keys))}
		}
		lc.entries = append(lc.entries, e)
		epoch, ok := markerEpoch(e.id)
		if !ok {
			continue
		}
		first := e.keys[0]
		if e.idx != nil {
			first = e.keys[e.idx[0]]
		}
		set := markerSetKey(layoutKey("@", first), epoch)
		switch r.IntN(12) {
		case 0, 1: // the id already applied
			s := lc.state[set]
			if s.kind == "" || s.kind == "set" {
				s.kind, s.members, s.ttl = "set", append(s.members, e.id), 1+r.Int64N(1e7)
				lc.state[set] = s
			}
		case 2: // a key of another type where the set goes: the SADD fails
			lc.state[set] = layoutStored{kind: "string", v: "garbage"}
		}
	}
	return lc
}

// loneCounts counts, over a test's cases, the reconciliations the store
// sent in the lone layout and the markers (sets and keys) read back, so
// that a test fails when the lone path or the marker comparison went
// unused.
type loneCounts struct{ lone, all, markers int }

// runLoneCase writes lc's state under tag and sends its entries one by
// one, each alone in a call of its own, the clock moving between them: in
// the batch layout when generic, else as the store sends a call
// (callArgs: the lone layout when it fits); then reads back every key of
// the tag. The reply is each call's, in order.
func runLoneCase(t testing.TB, c *redis.Client, lc layoutCase, tag string, generic bool, n *loneCounts) layoutResult {
	t.Helper()
	ctx := context.Background()
	now := lc.now
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now },
		DedupFor: time.Duration(goldenDedupFor) * time.Millisecond, VoidFor: time.Duration(goldenVoidFor) * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.rcGeneric = generic
	var res layoutResult
	stored := runLayoutCaseWith(t, c, lc, tag, func() {
		for i, e := range lc.entries {
			now = lc.now.Add(time.Duration(i*i*7919) * time.Microsecond)
			deltas := make([]Delta, len(e.keys))
			for j, k := range e.keys {
				deltas[j] = Delta{Key: layoutKey(tag, k), Limit: e.limits[j], Units: e.units[j]}
			}
			call := r.newReconcileCall()
			call.add(i, e.id, deltas, e.idx, e.mode)
			if len(call.owners) == 0 { // nothing to send (zero units)
				res.reply = append(res.reply, -97)
				continue
			}
			keys, args := call.callArgs(r)
			if !generic && n != nil {
				n.all++
				if _, lone := call.loneArgs(r); lone != nil {
					n.lone++
				}
			}
			reply, err := r.call(ctx, r.reconcile, keys, args...).Int64Slice()
			if err != nil {
				res.err = true
				reply = []int64{-98}
			}
			res.reply = append(append(res.reply, reply...), -99) // -99 ends a call's reply
		}
	})
	res.keys = stored.keys
	if n != nil {
		for k := range res.keys {
			if strings.HasPrefix(k, "llmguard:") {
				n.markers++
			}
		}
	}
	return res
}

// compareLone runs lc's reconciliations alone in the batch layout (the
// oracle) under tag "o" and as the store sends them under tag "n", on the
// same server, and reports every difference (see diffLayout).
func compareLone(t testing.TB, c *redis.Client, lc layoutCase, exactTTL bool, n *loneCounts, where string) {
	t.Helper()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := runLoneCase(t, c, lc, "o", true, nil)
	got := runLoneCase(t, c, lc, "n", false, n)
	diffLayout(t, got, want, exactTTL, start, where)
}

// TestReconcileLoneMatchesBatch runs random timelines of lone
// reconciliations (randomLoneCase) as the store sends them (the lone
// layout when they fit it) and in reconcile.lua's batch layout, the
// store's path for every other call: every reply and every key (bucket
// values, marker sets' members, TTLs) must agree, on miniredis (gopher-lua,
// by EVALSHA) and on a real redis-server (Lua 5.1, by FCALL: the
// library's caches of limits, shapes, values and TTL texts last from call
// to call). Most calls must have gone in the lone layout.
func TestReconcileLoneMatchesBatch(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 6))
	var cases []layoutCase
	for range 250 {
		cases = append(cases, randomLoneCase(rnd))
	}
	layoutMatchesBatch(t, cases, "lone", compareLone)
}

// layoutMatchesBatch runs compare on every case, on miniredis (the cases
// onMiniredis picks; TTLs compared exactly) and on a real redis-server,
// and fails unless most calls went in the layout named (compare counts
// them in its loneCounts) and some keys were compared.
func layoutMatchesBatch(t *testing.T, cases []layoutCase, layout string,
	compare func(t testing.TB, c *redis.Client, lc layoutCase, exactTTL bool, n *loneCounts, where string)) {
	for _, where := range []string{"miniredis", "redis-server"} {
		t.Run(where, func(t *testing.T) {
			var c *redis.Client
			if where == "miniredis" {
				mr := miniredis.RunT(t)
				c = redis.NewClient(&redis.Options{Addr: mr.Addr()})
				defer c.Close()
			} else {
				c = redistest.Shared(t).Client()
			}
			var n loneCounts
			for i, lc := range cases {
				if where == "miniredis" && !onMiniredis(i) {
					continue
				}
				compare(t, c, lc, where == "miniredis", &n, fmt.Sprintf("case %d", i))
			}
			if n.lone*2 < n.all || n.markers == 0 {
				t.Errorf("%d of %d calls in the %s layout, %d keys compared: the test no longer covers the %s path", n.lone, n.all, layout, n.markers, layout)
			}
			t.Logf("%d of %d calls in the %s layout; %d keys compared", n.lone, n.all, layout, n.markers)
		})
	}
}

// FuzzReconcileLone is TestReconcileLoneMatchesBatch driven by the
// fuzzer's seeds, on a real redis-server:
//
//	go test -run X -fuzz FuzzReconcileLone -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzReconcileLone(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(14), uint64(6))
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		compareLone(t, c, randomLoneCase(rand.New(rand.NewPCG(s1, s2))), false, nil, fmt.Sprintf("seeds %d %d", s1, s2))
	})
}
