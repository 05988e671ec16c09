package bucket

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRecentIDsTellLongIDsApart: ids are kept inline (up to 24 bytes whole,
// longer ones by prefix and hash); ids that share a prefix, or differ only
// in length, are still different ids.
func TestRecentIDsTellLongIDsApart(t *testing.T) {
	var r recentIDs
	const window = 1_000_000
	long := strings.Repeat("x", 30)
	ids := []string{"", "a", "a\x00", strings.Repeat("y", 24), strings.Repeat("y", 25), long + "a", long + "b", long + "ab"}
	for i, id := range ids {
		if r.seen(id, 0, window, 100) {
			t.Errorf("id %d (%q) seen before it was recorded", i, id)
		}
	}
	for i, id := range ids {
		if !r.seen(id, 1, window, 100) {
			t.Errorf("id %d (%q) not remembered", i, id)
		}
	}
	if r.len() != len(ids) {
		t.Errorf("%d ids remembered, want %d", r.len(), len(ids))
	}
}

// oracleIDs is recentIDs as it was before its generations were idTables
// (perf25): two Go maps, with get and set the read and the write lookup
// and record replaced in the store (one walk for both). It is the oracle
// of TestRecentIDsSeenDifferential and FuzzRecentIDsSeen.
type oracleIDs struct {
	cur, prev             map[idKey]mark
	since                 int64
	voidedCur, voidedPrev int
}

func (r *oracleIDs) expire(now, window int64) {
	switch {
	case now-r.since >= 2*window:
		r.prev, r.cur, r.since = nil, nil, now
		r.voidedCur, r.voidedPrev = 0, 0
	case now-r.since >= window:
		r.rotate(now)
	}
}

func (r *oracleIDs) rotate(now int64) {
	r.prev, r.cur, r.since = r.cur, nil, now
	r.voidedPrev, r.voidedCur = r.voidedCur, 0
}

// get returns id's mark at now, markNone when it is not remembered.
func (r *oracleIDs) get(id string, now, window int64) mark {
	r.expire(now, window)
	k := keyOf(id)
	if m, ok := r.cur[k]; ok {
		return m
	}
	return r.prev[k]
}

// set records id with mark m at now (in cur, where a later mark shadows an
// older one left in prev).
func (r *oracleIDs) set(id string, m mark, now, window int64, max int) {
	r.expire(now, window)
	k := keyOf(id)
	if _, ok := r.cur[k]; ok {
		r.cur[k] = m
		r.recountVoided()
		return
	}
	if len(r.cur) >= max {
		r.rotate(now)
	}
	if r.cur == nil {
		r.cur = make(map[idKey]mark, len(r.prev))
	}
	r.cur[k] = m
	r.recountVoided()
}

// recountVoided sets r's tombstone counts from its maps (the oracle's own
// count, independent of record's).
func (r *oracleIDs) recountVoided() {
	r.voidedCur, r.voidedPrev = 0, 0
	for _, m := range r.cur {
		if m == markVoided {
			r.voidedCur++
		}
	}
	for _, m := range r.prev {
		if m == markVoided {
			r.voidedPrev++
		}
	}
}

// seenOracle is recentIDs.seen as it was before it walked once
// (a112cdd).
func seenOracle(r *oracleIDs, id string, now, window int64, max int) bool {
	if r.get(id, now, window) != markNone {
		return true
	}
	r.set(id, markTaken, now, window, max)
	return false
}

// asMap is the ids t holds with their marks.
func (t *idTable) asMap() map[idKey]mark {
	m := make(map[idKey]mark, t.n)
	used := 0
	for i := range t.slots {
		if s := &t.slots[i]; s.used {
			m[s.k] = s.m
			used++
		}
	}
	if used != t.n {
		panic("idTable: n is not the slots used")
	}
	return m
}

// sameIDs reports how r differs from the oracle o ("" when it does not):
// each generation's ids and marks, when cur began, the tombstone counts.
func sameIDs(r *recentIDs, o *oracleIDs) string {
	for _, g := range []struct {
		name string
		t    *idTable
		m    map[idKey]mark
	}{{"cur", &r.cur, o.cur}, {"prev", &r.prev, o.prev}} {
		got := g.t.asMap()
		if len(got) != len(g.m) {
			return fmt.Sprintf("%s holds %d ids, oracle %d", g.name, len(got), len(g.m))
		}
		for k, m := range g.m {
			if gm, ok := got[k]; !ok || gm != m {
				return fmt.Sprintf("%s: id %q has mark %v (held %v), oracle %v", g.name, k.b, gm, ok, m)
			}
		}
	}
	if r.since != o.since || r.voidedCur != o.voidedCur || r.voidedPrev != o.voidedPrev {
		return fmt.Sprintf("since %d, voided %d/%d; oracle %d, %d/%d", r.since, r.voidedCur, r.voidedPrev, o.since, o.voidedCur, o.voidedPrev)
	}
	return ""
}

// walkIDs are the ids of runSeenOps: short and long, sharing prefixes,
// then 248 of llmguard's own form (bucket.NewRequestID), so that a walk's
// generations grow past their first table.
var walkIDs = func() []string {
	ids := []string{"a", "b", "req-000000000000000000001", "req-000000000000000000002",
		strings.Repeat("x", 24), strings.Repeat("x", 25), strings.Repeat("x", 24) + "y", ""}
	var b [RequestIDLen]byte
	for i := range 248 {
		putRequestID(&b, uint32(1_700_000_000+i/16), uint64(i)*0x9E3779B97F4A7C15)
		ids = append(ids, string(b[:]))
	}
	return ids
}()

// runSeenOps applies the same random walk of seen, set and get calls
// (clock steps forward and back, small size bounds that rotate early, ids
// short and long) to two recentIDs, seen by the one-walk code on one and
// by the oracle on the other, and compares every answer and the whole
// state after each step.
func runSeenOps(t testing.TB, ops []byte) {
	var (
		fast recentIDs
		slow oracleIDs
	)
	now := int64(1_000_000)
	for i := 0; i+3 < len(ops); i += 4 {
		// The first eight ids (short, long, sharing prefixes) three times
		// in four; max small enough to rotate early, or up to 300 (when
		// the op's high bit is set) so that cur grows past its table.
		id := walkIDs[int(ops[i+1])%8]
		if ops[i+1]&0xc0 == 0xc0 {
			id = walkIDs[int(ops[i+1])%len(walkIDs)]
		}
		op, window, max := ops[i]%8, int64(ops[i+2]%4)*10, int(ops[i+3]%5)
		if ops[i]&0x80 != 0 {
			max = int(ops[i+3]) + 45
		}
		switch op {
		case 0, 1, 2:
			if got, want := fast.seen(id, now, window, max), seenOracle(&slow, id, now, window, max); got != want {
				t.Fatalf("op %d: seen(%q, %d, %d, %d) = %v, oracle %v", i/4, id, now, window, max, got, want)
			}
		case 3:
			m := mark(ops[i+3] % 3)
			k, _, inCur := fast.lookup(id, now, window)
			fast.record(k, m, inCur, now, max)
			slow.set(id, m, now, window, max)
		case 4:
			_, got, _ := fast.lookup(id, now, window)
			if want := slow.get(id, now, window); got != want {
				t.Fatalf("op %d: get(%q) = %v, oracle %v", i/4, id, got, want)
			}
		case 5:
			now -= int64(ops[i+2]) // a clock that steps back
		case 6:
			// lookup then record, as TakeInto and Void do, against get
			// then set.
			// lookupForTake (when bit 2 of the op's last byte is set)
			// answers a take alike: the same tombstone or none.
			forTake := ops[i+3]&4 != 0
			lookup := fast.lookup
			if forTake {
				lookup = fast.lookupForTake
			}
			k, got, inCur := lookup(id, now, window)
			if want := slow.get(id, now, window); got != want && !(forTake && takeMarked(got) == takeMarked(want)) {
				t.Fatalf("op %d: lookup(%q, take %v) = %v, oracle %v", i/4, id, forTake, got, want)
			}
			m := mark(ops[i+3] % 3)
			fast.record(k, m, inCur, now, max)
			slow.set(id, m, now, window, max)
		default:
			now += int64(ops[i+2])
		}
		if d := sameIDs(&fast, &slow); d != "" {
			t.Fatalf("op %d (%d %q): %s", i/4, op, id, d)
		}
	}
}

func TestRecentIDsSeenDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		ops := make([]byte, 400)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		runSeenOps(t, ops)
	}
}

// FuzzRecentIDsSeen: any walk of calls leaves the one-walk seen's answers
// and state equal to the oracle's.
//
//	go test -run X -fuzz FuzzRecentIDsSeen -fuzztime 60s ./bucket
func FuzzRecentIDsSeen(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 0, 0, 1, 2, 6, 20, 20, 0, 0, 0, 1, 2, 3, 1, 1, 2, 0, 1, 1, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 {
			ops = ops[:4096]
		}
		runSeenOps(t, ops)
	})
}
