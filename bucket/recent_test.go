package bucket

import (
	"math/rand/v2"
	"reflect"
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

// get and set are the read and the write lookup and record replaced in
// the store (one walk for both); kept as the oracles of seen and of
// lookup with record.
// get returns id's mark at now, markNone when it is not remembered.
func (r *recentIDs) get(id string, now, window int64) mark {
	r.expire(now, window)
	k := keyOf(id)
	if m, ok := r.cur[k]; ok {
		return m
	}
	return r.prev[k]
}

// set records id with mark m at now (in cur, where a later mark shadows an
// older one left in prev).
func (r *recentIDs) set(id string, m mark, now, window int64, max int) {
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
func (r *recentIDs) recountVoided() {
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
// (a112cdd), kept as the oracle of TestRecentIDsSeenDifferential.
func seenOracle(r *recentIDs, id string, now, window int64, max int) bool {
	if r.get(id, now, window) != markNone {
		return true
	}
	r.set(id, markTaken, now, window, max)
	return false
}

// runSeenOps applies the same random walk of seen, set and get calls
// (clock steps forward and back, small size bounds that rotate early, ids
// short and long) to two recentIDs, seen by the one-walk code on one and
// by the oracle on the other, and compares every answer and the whole
// state after each step.
func runSeenOps(t testing.TB, ops []byte) {
	var fast, slow recentIDs
	ids := []string{"a", "b", "req-000000000000000000001", "req-000000000000000000002",
		strings.Repeat("x", 24), strings.Repeat("x", 25), strings.Repeat("x", 24) + "y", ""}
	now := int64(1_000_000)
	for i := 0; i+3 < len(ops); i += 4 {
		op, id, window, max := ops[i]%8, ids[int(ops[i+1])%len(ids)], int64(ops[i+2]%4)*10, int(ops[i+3]%5)
		switch op {
		case 0, 1, 2:
			if got, want := fast.seen(id, now, window, max), seenOracle(&slow, id, now, window, max); got != want {
				t.Fatalf("op %d: seen(%q, %d, %d, %d) = %v, oracle %v", i/4, id, now, window, max, got, want)
			}
		case 3:
			m := mark(ops[i+3] % 3)
			fast.set(id, m, now, window, max)
			slow.set(id, m, now, window, max)
		case 4:
			if got, want := fast.get(id, now, window), slow.get(id, now, window); got != want {
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
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("op %d: state %+v, oracle %+v", i/4, fast, slow)
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
