package bucket

import (
	"context"
	"fmt"
	"math"
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

// batchEntry is one element of a reconciliation batch: a Reconcile of id
// (mode "r"), a Void of its take ("v", the deltas the take's costs,
// negated), or deltas applied with no marker ("n": an empty request id, or
// an internal refund).
type batchEntry struct {
	mode   string
	id     string
	deltas []Delta
}

// storedValue is a key as the model holds it: its value as the scripts
// write it ("" when missing) and its TTL in ms (-1: none).
type storedValue struct {
	v   string
	ttl int64
}

// batchCase is one batch from a given state of its keys and markers.
type batchCase struct {
	now     time.Time
	state   map[string]storedValue // bucket keys and markers before
	entries []batchEntry
}

// TestReconcileBatchGolden runs random batches of reconciliations, voids
// and refunds through reconcile.lua (one script for the whole batch, as
// ReconcileBatch sends it) and through a model that checks their markers one
// by one and settles the applied deltas per bucket and limit with the Go
// arithmetic (Apply, ApplyQuota, voidMark) at the same instant,
// storing each result as the scripts encode it: every entry's reply, every
// bucket's and marker's value and TTL must agree, bit for bit. Keys repeat
// within and across entries, request ids repeat within a batch and may be
// marked before it (ids of NewRequestID's form, of two epochs and one
// derived, have their markers in sets, beside the others' marker keys),
// limits change between entries (a reload) and keys change kind, deltas of zero units are left out (an entry of nothing but
// those records nothing), on miniredis (gopher-lua, whose TTLs do not run
// down) and a real redis-server (Lua 5.1).
func TestReconcileBatchGolden(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var cases []batchCase
	for range 400 {
		cases = append(cases, randomBatch(r))
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		runBatchGolden(t, c, miniredisSample(cases, nil), true)
	})
	t.Run("redis-server", func(t *testing.T) {
		runBatchGolden(t, redistest.Shared(t).Client(), cases, false)
	})
}

// minStoredTTL is the shortest TTL, in ms, the scripts' randomised
// golden and layout tests give a key they store before a script runs: a
// real redis-server's TTLs run down on its own clock while a test sets the
// keys, runs the script and reads them back, and on a loaded machine a key
// set to expire within milliseconds was gone before it was read (perf25,
// load average 35). No branch of the scripts reads a TTL's length: they
// keep it (KEEPTTL) or set their own.
const minStoredTTL = 60_000

const (
	goldenDedupFor = int64(600000) // ms
	goldenVoidFor  = int64(10000)  // ms
)

var batchKeys = []string{"golden:{b}:k0", "golden:{b}:k1", "golden:{b}:k2", "golden:{b}:q3", "golden:{b}:q4"}

func randomBatch(r *rand.Rand) batchCase {
	now := t0.Add(time.Duration(r.Int64N(1e9)) * time.Microsecond)
	start := now.Add(-time.Duration(r.Int64N(int64(24*time.Hour/time.Microsecond))) * time.Microsecond)
	day := Quota(0, start, start.Add(24*time.Hour))
	limits := make([]Limit, len(batchKeys))
	for i := range limits {
		if i < 3 {
			limits[i] = randomLimit(r)
		} else {
			limits[i] = day
			limits[i].Capacity = randomLimit(r).Capacity
		}
	}
	bc := batchCase{now: now, state: map[string]storedValue{}}
	ttl := func() int64 {
		if r.IntN(5) == 0 {
			return -1
		}
		return minStoredTTL + r.Int64N(1e7)
	}
	for i, key := range batchKeys {
		l := limits[i]
		switch k := r.IntN(10); {
		case k < 3: // missing
		case k < 7 && !l.IsQuota(), k < 5:
			level := (r.Float64()*2 - 0.5) * float64(max(l.Capacity, 1000))
			updated := now.Add(-time.Duration(r.Int64N(int64(2*time.Hour/time.Microsecond))) * time.Microsecond)
			if r.IntN(10) == 0 {
				updated = now.Add(time.Duration(r.Int64N(1e6)) * time.Microsecond) // a clock stepped back
			}
			bc.state[key] = storedValue{v: strconv.FormatFloat(level, 'g', 17, 64) + " " + strconv.FormatInt(updated.UnixMicro(), 10), ttl: ttl()}
		default:
			window := start
			switch r.IntN(4) {
			case 0:
				window = start.Add(-24 * time.Hour) // a past period
			case 1:
				window = start.Add(24 * time.Hour) // a later one
			}
			bc.state[key] = storedValue{v: fmt.Sprintf("q %d %d", 1+r.Int64N(2*max(l.Capacity, 10)), window.UnixMicro()), ttl: ttl()}
		}
	}
	ids := []string{"a", "b", "c", "d", goldenSetIDs[0], goldenSetIDs[1], goldenSetIDs[2], goldenSetIDs[3]}
	for range 1 + r.IntN(12) {
		e := batchEntry{mode: []string{"r", "r", "r", "v", "n"}[r.IntN(5)], id: ids[r.IntN(len(ids))]}
		for range 1 + r.IntN(4) {
			i := r.IntN(len(batchKeys))
			l := limits[i]
			switch r.IntN(20) {
			case 0: // a reload changed the limit
				l = randomLimit(r)
			case 1: // a quota's period moved on, or a rate became a quota
				l = Quota(1+r.Int64N(1e6), start.Add(24*time.Hour), start.Add(48*time.Hour))
			}
			units := r.Int64N(2*max(l.Capacity, 10)) - max(l.Capacity, 10)
			if r.IntN(10) == 0 {
				units = 0
			}
			if e.mode == "v" {
				units = -r.Int64N(max(l.Capacity, 10)) // a take's cost, negated
			}
			e.deltas = append(e.deltas, Delta{Key: batchKeys[i], Limit: l, Units: units})
		}
		if e.mode == "v" { // a void's keys are distinct, as a take's
			seen := map[string]bool{}
			e.deltas = slicesFilter(e.deltas, func(d Delta) bool { ok := !seen[d.Key]; seen[d.Key] = true; return ok })
		}
		bc.entries = append(bc.entries, e)
		switch r.IntN(6) { // markers already there
		case 0:
			if epoch, ok := markerEpoch(e.id); ok {
				mk := markerSetKey(e.deltas[0].Key, epoch)
				old := bc.state[mk]
				bc.state[mk] = storedValue{v: addMember(old.v, e.id), ttl: ttl()}
				break
			}
			bc.state[markerKey(e.deltas[0].Key, e.id)] = storedValue{v: "1", ttl: ttl()}
		case 1:
			if epoch, ok := markerEpoch(e.id); ok && r.IntN(2) == 0 { // taken in a batch
				mk := takenSetKey(e.deltas[0].Key, epoch)
				bc.state[mk] = storedValue{v: addMember(bc.state[mk].v, e.id), ttl: ttl()}
				break
			}
			bc.state[takeMarkerKey(e.deltas[0].Key, e.id)] = storedValue{v: []string{"t", "v"}[r.IntN(2)], ttl: ttl()}
		}
	}
	return bc
}

// goldenSetIDs are request ids of NewRequestID's form, whose markers are
// members of a set: the first two of one epoch, the third of the next, the
// fourth derived from the first.
var goldenSetIDs = []string{
	"67c2f6c00123456789abcdef", "67c2f6c9fedcba9876543210", "67c2f6ca0f1e2d3c4b5a6978", "67c2f6c00123456789abcdef/shadow",
}

// setPrefix starts the model's value of a set key: its members, sorted,
// each after a newline.
const setPrefix = "set:"

func hasMember(set, id string) bool {
	return strings.Contains(set+"\n", "\n"+id+"\n")
}

func addMember(set, id string) string {
	if hasMember(set, id) {
		return set
	}
	members := strings.Split(strings.TrimPrefix(set, setPrefix), "\n")[1:]
	members = append(members, id)
	slices.Sort(members)
	return setPrefix + "\n" + strings.Join(members, "\n")
}

func slicesFilter(ds []Delta, keep func(Delta) bool) []Delta {
	var out []Delta
	for _, d := range ds {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// groupKey names the deltas of one bucket under one limit (its ARGV).
type groupKey struct {
	key   string
	limit [5]int64
}

// deltaGroup is the applied deltas of one bucket under one limit, summed:
// refund the negative units, spend the positive ones.
type deltaGroup struct {
	key           string
	limit         Limit
	refund, spend int64
}

// model applies bc's entries one by one with the Go arithmetic, as the
// scripts' encoding stores them, and returns the reply of each entry sent
// (those of mode "r" or "n" with no delta of non-zero units are not) and
// every key afterwards. An entry that applied replies 2 instead of 1 when
// a quota group it has a delta in applied to nothing (the period moved on).
func (bc batchCase) model() ([]int64, map[string]storedValue) {
	st := map[string]storedValue{}
	for k, v := range bc.state {
		st[k] = v
	}
	now := bc.now.UnixMicro()
	var reply []int64
	var groups []deltaGroup
	groupAt := map[groupKey]int{}
	inGroup := map[int][]int{} // by reply index of an entry that applied: its groups
	for _, e := range bc.entries {
		var deltas []Delta
		for _, d := range e.deltas {
			if d.Units != 0 {
				deltas = append(deltas, d)
			}
		}
		if len(deltas) == 0 && e.mode != "v" {
			continue
		}
		applies := true
		switch e.mode {
		case "r":
			if epoch, ok := markerEpoch(e.id); ok { // a member of its epoch's set
				mk := markerSetKey(e.deltas[0].Key, epoch)
				old := st[mk]
				if applies = !hasMember(old.v, e.id); applies {
					st[mk] = storedValue{v: addMember(old.v, e.id), ttl: goldenDedupFor}
				}
				break
			}
			mk := markerKey(e.deltas[0].Key, e.id)
			if _, ok := st[mk]; ok {
				applies = false
			} else {
				st[mk] = storedValue{v: "1", ttl: goldenDedupFor}
			}
		case "v":
			mk := takeMarkerKey(e.deltas[0].Key, e.id)
			if epoch, ok := markerEpoch(e.id); ok { // a take a batch recorded in its taken set counts as "t"
				m := map[string]mark{"": markNone, "t": markTaken, "v": markVoided}[st[mk].v]
				if m == markNone && hasMember(st[takenSetKey(e.deltas[0].Key, epoch)].v, e.id) {
					m = markTaken
				}
				next, refund := voidMark(m)
				if markText(next) != st[mk].v {
					st[mk] = storedValue{v: markText(next), ttl: goldenVoidFor}
				}
				// The id joins its epoch's voided set too, which lives the
				// void window past its last write (a batch reads the set).
				vk := voidedSetKey(e.deltas[0].Key, epoch)
				st[vk] = storedValue{v: addMember(st[vk].v, e.id), ttl: goldenVoidFor}
				applies = refund
				break
			}
			m := map[string]mark{"": markNone, "t": markTaken, "v": markVoided}[st[mk].v]
			next, refund := voidMark(m)
			if next != m {
				st[mk] = storedValue{v: markText(next), ttl: goldenVoidFor}
			}
			applies = refund
		}
		if !applies {
			reply = append(reply, 0)
			continue
		}
		reply = append(reply, 1)
		for _, d := range deltas {
			g := groupKey{d.Key, limitArgs(d.Limit)}
			at, ok := groupAt[g]
			if !ok {
				at = len(groups)
				groupAt[g] = at
				groups = append(groups, deltaGroup{key: d.Key, limit: d.Limit})
			}
			if d.Units < 0 {
				groups[at].refund += d.Units
			} else {
				groups[at].spend += d.Units
			}
			inGroup[len(reply)-1] = append(inGroup[len(reply)-1], at)
		}
	}
	moved := make([]bool, len(groups))
	// The applied deltas of each bucket under each limit, summed, settle
	// once after every marker, in order of the group's first delta: the
	// refunds, then the charges (see reconcile.lua's settle).
	for gi, g := range groups {
		old, found := st[g.key]
		write := func(v string, px int64, keep bool) {
			switch {
			case v == "":
				delete(st, g.key)
			case keep:
				st[g.key] = storedValue{v: v, ttl: old.ttl}
			default:
				st[g.key] = storedValue{v: v, ttl: px}
			}
		}
		var sums []float64
		for _, u := range []int64{g.refund, g.spend} {
			if u != 0 {
				sums = append(sums, float64(u))
			}
		}
		if g.limit.IsQuota() {
			_, windowStart, windowEnd := g.limit.window()
			used, window := 0.0, windowStart
			if found {
				var u, w int64
				if n, err := fmt.Sscanf(old.v, "q %d %d", &u, &w); n == 2 && err == nil && fmt.Sprintf("q %d %d", u, w) == old.v {
					used, window = float64(u), w
				}
			}
			var applied bool
			for _, units := range sums {
				used, window, applied = applyQuota(used, window, windowStart, windowEnd, units)
			}
			switch {
			case !applied:
				moved[gi] = len(sums) > 0
			case used <= 0 && found:
				write("", 0, false)
			case used <= 0:
			case window == windowStart:
				write(fmt.Sprintf("q %d %d", int64(used), window), int64(math.Floor(quotaExpiry(windowEnd, now)/1000)), false)
			default:
				write(fmt.Sprintf("q %d %d", int64(used), window), 0, true)
			}
			continue
		}
		capacity, rate, per := g.limit.floats()
		level, updated := capacity, now
		if found {
			a, b, ok := strings.Cut(old.v, " ")
			l, err1 := strconv.ParseFloat(a, 64)
			u, err2 := strconv.ParseInt(b, 10, 64)
			if ok && err1 == nil && err2 == nil {
				level, updated = l, u
			}
		}
		for _, units := range sums {
			level, updated = apply(level, updated, capacity, rate, per, now, units)
		}
		switch {
		case level >= capacity && found:
			write("", 0, false)
		case level >= capacity:
		default:
			reset := wait(level, capacity, rate, per)
			px := int64(math.Floor((float64(updated)+reset-float64(now))/1000)) + 1000
			write(strconv.FormatFloat(level, 'g', 17, 64)+" "+strconv.FormatInt(updated, 10), px, false)
		}
	}
	for o, gs := range inGroup {
		for _, gi := range gs {
			if moved[gi] {
				reply[o] = 2
			}
		}
	}
	return reply, st
}

func runBatchGolden(t *testing.T, c *redis.Client, cases []batchCase, exactTTL bool) {
	ctx := context.Background()
	for i, bc := range cases {
		where := fmt.Sprintf("batch %d", i+1)
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for k, v := range bc.state {
			ttl := time.Duration(v.ttl) * time.Millisecond
			if v.ttl < 0 {
				ttl = 0
			}
			if members, ok := strings.CutPrefix(v.v, setPrefix); ok {
				for _, m := range strings.Split(members, "\n")[1:] {
					if err := c.SAdd(ctx, k, m).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if ttl > 0 {
					c.PExpire(ctx, k, ttl)
				}
				continue
			}
			if err := c.Set(ctx, k, v.v, ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		now := bc.now
		r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now },
			DedupFor: time.Duration(goldenDedupFor) * time.Millisecond, VoidFor: time.Duration(goldenVoidFor) * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		call := r.newReconcileCall()
		for j, e := range bc.entries {
			mode := map[string]scriptMode{"r": modeReconcile, "v": modeVoid, "n": modeRefund}[e.mode]
			call.add(j, e.id, e.deltas, nil, mode)
		}
		wantReply, want := bc.model()
		var got []int64
		if len(call.owners) > 0 {
			got, err = r.call(ctx, r.reconcile, call.keys(), call.args(r)...).Int64Slice()
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantReply) {
			t.Errorf("%s: replies %v, model %v", where, got, wantReply)
		}
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: Lua left %s (%s), the model none", where, k, c.Type(ctx, k).Val())
			}
		}
		for k, w := range want {
			var v string
			var err error
			if c.Type(ctx, k).Val() == "set" {
				var members []string
				members, err = c.SMembers(ctx, k).Result()
				slices.Sort(members)
				v = setPrefix + "\n" + strings.Join(members, "\n")
			} else {
				v, err = c.Get(ctx, k).Result()
			}
			if err == redis.Nil {
				t.Errorf("%s: Lua left no %s, the model %q", where, k, w.v)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameStored(v, w.v) {
				t.Errorf("%s: %s is %q in Lua, %q in the model", where, k, v, w.v)
			}
			pttl := c.PTTL(ctx, k).Val()
			switch {
			case w.ttl < 0 && pttl != -time.Millisecond && pttl != -1:
				t.Errorf("%s: %s expires in %v in Lua, never in the model", where, k, pttl)
			case w.ttl >= 0 && exactTTL && pttl != time.Duration(w.ttl)*time.Millisecond:
				t.Errorf("%s: %s expires in %v in Lua, %dms in the model", where, k, pttl, w.ttl)
			case w.ttl >= 0 && (pttl <= 0 || pttl > time.Duration(w.ttl)*time.Millisecond):
				t.Errorf("%s: %s expires in %v in Lua, %dms in the model", where, k, pttl, w.ttl)
			}
		}
	}
}

// sameStored compares two stored values: the same text, or token bucket
// states whose numbers are the same bit for bit (Lua's %.17g and Go's 'g'
// may spell a number differently).
func sameStored(a, b string) bool {
	if a == b {
		return true
	}
	la, ua, ok1 := strings.Cut(a, " ")
	lb, ub, ok2 := strings.Cut(b, " ")
	fa, err1 := strconv.ParseFloat(la, 64)
	fb, err2 := strconv.ParseFloat(lb, 64)
	return ok1 && ok2 && err1 == nil && err2 == nil && ua == ub && math.Float64bits(fa) == math.Float64bits(fb)
}
