package bucket

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// runsOracleSource is reconcile.lua as an EVAL script (core.lua
// inserted) at d2d4679, before runDeltas: every entry of a batch ran the
// batch's loop, its deltas added to their groups' tables one by one. The
// oracle of TestReconcileRunsMatchOld, sent the same KEYS and ARGV as the
// store's script (the layout did not change).
//
//go:embed testdata/reconcile_d2d4679.lua
var runsOracleSource string

var runsOracleScript = redis.NewScript(runsOracleSource)

// randomRunsCase draws a batch of reconciliations in runs of one shape, as
// a busy node sends them (a tenant's requests one after the other): it
// takes a randomLayoutCase (six keys of every kind, stored values of every
// kind and garbage, markers set before) and replaces its entries by runs
// of up to 40 entries, each run a copy of one of up to three of its
// entries (its mode, keys and limits; modes 'h' and 'n', which runDeltas
// runs, most often), each entry its own units (now and then 0, or past
// 2^53) and, when its template's id is of NewRequestID's form (modes 'h'
// and 'w'), its own such id (now and then an id repeated in the batch, of
// another epoch, or already in its marker set); other ids repeat.
func randomRunsCase(r *rand.Rand) layoutCase {
	lc := randomLayoutCase(r)
	templates := lc.entries
	if len(templates) > 3 {
		templates = templates[:1+r.IntN(3)]
	}
	for i := range templates {
		switch r.IntN(4) {
		case 0, 1: // mode 'h'
			templates[i].mode, templates[i].id = modeReconcile, NewRequestID(lc.now)
		case 2: // mode 'n'
			templates[i].mode, templates[i].id = modeRefund, ""
		}
	}
	var ids []string
	lc.entries = nil
	for range 1 + r.IntN(4) {
		t := templates[r.IntN(len(templates))]
		for range 1 + r.IntN(40) {
			e := t
			e.units = make([]int64, len(t.units))
			for j := range e.units {
				switch {
				case r.IntN(16) == 0:
					e.units[j] = 0
				case r.IntN(16) == 0:
					e.units[j] = (1<<53 + r.Int64N(1<<60)) * (1 - 2*r.Int64N(2))
				case t.mode == modeVoid:
					e.units[j] = -r.Int64N(1e4)
				case t.limits[j].Concurrent:
					e.units[j] = int64(r.IntN(3) - 1)
				default:
					e.units[j] = r.Int64N(2e4) - 1e4
				}
			}
			if _, ok := markerEpoch(t.id); ok {
				switch {
				case len(ids) > 0 && r.IntN(10) == 0:
					e.id = ids[r.IntN(len(ids))]
				case r.IntN(10) == 0:
					e.id = NewRequestID(lc.now.Add(-10 * time.Second))
				default:
					e.id = NewRequestID(lc.now)
				}
				ids = append(ids, e.id)
			}
			lc.entries = append(lc.entries, e)
			if epoch, ok := markerEpoch(e.id); ok && e.mode == modeReconcile && r.IntN(8) == 0 {
				first := e.keys[0]
				if e.idx != nil {
					first = e.keys[e.idx[0]]
				}
				set := markerSetKey(layoutKey("@", first), epoch)
				s := lc.state[set]
				s.kind, s.members, s.ttl = "set", append(s.members, e.id), 1+r.Int64N(1e7)
				lc.state[set] = s
			}
		}
	}
	return lc
}

// compareRuns runs lc's entries as one call of the store's reconcile.lua
// (under tag "n") and of the script at d2d4679 (tag "o"), the same KEYS
// and ARGV (reconcileCall's batch layout; the old script gets its units
// inline, inlineArgs, the store's packed, args), on the same server and
// instant, and reports every difference (diffLayout: the reply, whether
// the call failed, every key's type, value, members and TTL).
func compareRuns(t testing.TB, c *redis.Client, lc layoutCase, exactTTL bool, where string) {
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
	run := func(tag string, prev bool) layoutResult {
		var res layoutResult
		stored := runLayoutCaseWith(t, c, lc, tag, func() {
			call := r.newReconcileCall()
			for j, e := range lc.entries {
				deltas := make([]Delta, len(e.keys))
				for i, k := range e.keys {
					deltas[i] = Delta{Key: layoutKey(tag, k), Limit: e.limits[i], Units: e.units[i]}
				}
				call.add(j, e.id, deltas, e.idx, e.mode)
			}
			if len(call.keys()) == 0 {
				return
			}
			var cmd *redis.Cmd
			if prev {
				cmd = runsOracleScript.Run(ctx, c, call.keys(), call.inlineArgs(r)...)
			} else {
				cmd = r.call(ctx, r.reconcile, call.keys(), call.args(r)...)
			}
			reply, err := cmd.Int64Slice()
			res.reply, res.err = reply, err != nil
		})
		res.keys = stored.keys
		return res
	}
	start := time.Now()
	want := run("o", true)
	got := run("n", false)
	got.reply = asOldReply(got.reply)
	diffLayout(t, got, want, exactTTL, start, where)
}

// TestReconcileRunsMatchOld runs random batches in runs of one shape
// (randomRunsCase) through reconcile.lua and through its text at d2d4679,
// kept as the oracle, with the same KEYS and ARGV: every reply (asOldReply: a 2 read as 1) and every
// key (value, members, TTL) must agree, on a real redis-server (Lua 5.1,
// by FCALL) and, one case in miniredisStride, on miniredis (gopher-lua,
// by EVALSHA). It also counts
// the runs runDeltas takes (modes 'h' and 'n', distinct keys, no in-flight
// limit), so that a generator that stopped making them fails.
func TestReconcileRunsMatchOld(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 6))
	var cases []layoutCase
	fast := 0
	for range 300 {
		lc := randomRunsCase(rnd)
		cases = append(cases, lc)
		if runsFast(lc) {
			fast++
		}
	}
	if fast < 60 {
		t.Fatalf("only %d of %d cases have a run runDeltas takes", fast, len(cases))
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		for i, lc := range cases {
			if !onMiniredis(i) {
				continue
			}
			compareRuns(t, c, lc, true, fmt.Sprintf("case %d", i))
		}
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		for i, lc := range cases {
			compareRuns(t, c, lc, false, fmt.Sprintf("case %d", i))
		}
	})
}

// runsFast tells whether lc has a run of two or more entries of mode
// 'h' or 'n' whose deltas (those sent: units not 0) are on distinct keys,
// none an in-flight limit: a run runDeltas takes (a mode 'h' run also
// needs its set to hold more than one entry, which two entries of one
// epoch in a run give).
func runsFast(lc layoutCase) bool {
	for i := 1; i < len(lc.entries); i++ {
		e, prev := lc.entries[i], lc.entries[i-1]
		if e.mode == modeVoid || (e.mode == modeReconcile) != (e.id != "") || fmt.Sprint(e.keys, e.idx) != fmt.Sprint(prev.keys, prev.idx) || e.mode != prev.mode {
			continue
		}
		if _, ok := markerEpoch(e.id); e.id != "" && !ok {
			continue
		}
		seen, ok := map[int]bool{}, true
		for j, k := range e.keys {
			if e.limits[j].Concurrent || seen[k] {
				ok = false
			}
			seen[k] = true
		}
		if ok {
			return true
		}
	}
	return false
}

// FuzzReconcileRuns is TestReconcileRunsMatchOld driven by the fuzzer's
// seeds, on a real redis-server:
//
//	go test -run XXX -fuzz '^FuzzReconcileRuns$' -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzReconcileRuns(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(14), uint64(6))
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		compareRuns(t, c, randomRunsCase(rand.New(rand.NewPCG(s1, s2))), false, fmt.Sprintf("seeds %d %d", s1, s2))
	})
}

// TestReconcileRunsShareRedis is a rolling upgrade's check: nodes of the
// build before runDeltas (the script of d2d4679) and of this one send
// their reconciliations to one Redis, the same buckets and marker sets.
// Each random case (randomRunsCase) is cut into two to four calls, sent
// one after the other; under tag "m" each call goes, at random, through
// the old script or through the store's, under tag "o" every call
// through the old one: every reply (asOldReply) and every key (value, members, TTL)
// must agree, so each version reads what the other wrote (a request id
// one applied is a retry for the other; a bucket either settled is the
// other's starting state).
func TestReconcileRunsShareRedis(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 7))
	c := redistest.Shared(t).Client()
	ctx := context.Background()
	mixed := 0
	for n := range 150 {
		lc := randomRunsCase(rnd)
		cuts := []int{0}
		for range 1 + rnd.IntN(3) {
			cuts = append(cuts, rnd.IntN(len(lc.entries)+1))
		}
		cuts = append(cuts, len(lc.entries))
		slices.Sort(cuts)
		viaNew := make([]bool, len(cuts)-1)
		for i := range viaNew {
			viaNew[i] = rnd.IntN(2) == 0
		}
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		now := lc.now
		r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now },
			DedupFor: time.Duration(goldenDedupFor) * time.Millisecond, VoidFor: time.Duration(goldenVoidFor) * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		run := func(tag string, mixedRun bool) layoutResult {
			var res layoutResult
			stored := runLayoutCaseWith(t, c, lc, tag, func() {
				for k := range viaNew {
					call := r.newReconcileCall()
					for j, e := range lc.entries[cuts[k]:cuts[k+1]] {
						deltas := make([]Delta, len(e.keys))
						for i, key := range e.keys {
							deltas[i] = Delta{Key: layoutKey(tag, key), Limit: e.limits[i], Units: e.units[i]}
						}
						call.add(j, e.id, deltas, e.idx, e.mode)
					}
					if len(call.keys()) == 0 {
						continue
					}
					var cmd *redis.Cmd
					if mixedRun && viaNew[k] {
						cmd = r.call(ctx, r.reconcile, call.keys(), call.args(r)...)
					} else {
						cmd = runsOracleScript.Run(ctx, c, call.keys(), call.inlineArgs(r)...)
					}
					reply, err := cmd.Int64Slice()
					res.reply, res.err = append(res.reply, reply...), res.err || err != nil
				}
			})
			res.keys = stored.keys
			return res
		}
		if slices.Contains(viaNew, true) && slices.Contains(viaNew, false) {
			mixed++
		}
		start := time.Now()
		want := run("o", false)
		got := run("m", true)
		got.reply = asOldReply(got.reply)
		diffLayout(t, got, want, false, start, fmt.Sprintf("case %d (calls via the new script: %v)", n, viaNew))
	}
	if mixed < 30 {
		t.Fatalf("only %d cases mix the two scripts", mixed)
	}
}
