package bucket

import (
	"fmt"
	"testing"
)

// TestIDTableWrapsAround: ids whose hashes pick the table's last slot
// fill it and go on from slot 0; each is found with its own mark, ids of
// the same home slot never added are not found, and the thirteenth id
// grows the table to 32 slots with every id still found.
func TestIDTableWrapsAround(t *testing.T) {
	var tb idTable
	tb.alloc(1)
	tb.seed = 0 // fixed, so that the ids below share their home slot
	if len(tb.slots) != idTableMinSlots {
		t.Fatalf("a table for one id has %d slots, want %d", len(tb.slots), idTableMinSlots)
	}
	last := uint64(len(tb.slots) - 1)
	var homed []idKey
	const fit = 12 // ids a table of 16 slots holds (idTableFull)
	if idTableFull(fit, idTableMinSlots) || !idTableFull(fit+1, idTableMinSlots) {
		t.Fatalf("a table of %d slots does not hold exactly %d ids", idTableMinSlots, fit)
	}
	for i := 0; len(homed) < fit+3; i++ {
		k := keyOf(fmt.Sprintf("id-%d", i))
		if k.hash(0)>>tb.shift == last {
			homed = append(homed, k)
		}
	}
	in, out := homed[:fit], homed[fit:]
	for i := range in {
		if _, held := tb.set(&in[i], mark(i%2+1), 0); held {
			t.Fatalf("id %d held before it was set", i)
		}
	}
	if len(tb.slots) != idTableMinSlots {
		t.Fatalf("%d ids grew the table to %d slots", fit, len(tb.slots))
	}
	for _, i := range []int{15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10} {
		if !tb.slots[i].used {
			t.Errorf("slot %d unused: the walk from slot 15 does not wrap to 0", i)
		}
	}
	check := func(step string) {
		t.Helper()
		for i := range in {
			if m, ok := tb.get(&in[i]); !ok || m != mark(i%2+1) {
				t.Errorf("%s: id %d: mark %v held %v, want %v", step, i, m, ok, mark(i%2+1))
			}
		}
		for i := range out {
			if _, ok := tb.get(&out[i]); ok {
				t.Errorf("%s: id %d never set is held", step, i)
			}
		}
	}
	check("full")
	// Re-marking an id held changes its mark only.
	if old, held := tb.set(&in[3], markVoided, 0); !held || old != mark(3%2+1) {
		t.Errorf("set of a held id: old %v held %v", old, held)
	}
	if tb.len() != fit {
		t.Errorf("a re-marked id counted again: %d ids", tb.len())
	}
	tb.set(&in[3], mark(3%2+1), 0)
	extra := keyOf("one more")
	tb.set(&extra, markTaken, 0)
	if len(tb.slots) != 2*idTableMinSlots || tb.len() != fit+1 {
		t.Fatalf("after id %d: %d slots, %d ids; want %d, %d", fit+1, len(tb.slots), tb.len(), 2*idTableMinSlots, fit+1)
	}
	check("grown")
	if m, ok := tb.get(&extra); !ok || m != markTaken {
		t.Errorf("id %d: mark %v held %v", fit+1, m, ok)
	}
}

// TestIDTableManyIDs: 40,000 ids of llmguard's form (a second's worth of
// them sharing their first eight bytes) and longer ones, added one by one
// through twelve growths, each found with its mark at every step where
// the ids after it are not, as a Go map holds them.
func TestIDTableManyIDs(t *testing.T) {
	var (
		tb   idTable
		want = map[idKey]mark{}
		keys []idKey
		b    [RequestIDLen]byte
	)
	for i := range 40_000 {
		putRequestID(&b, uint32(1_700_000_000+i/1000), uint64(i)*0xD6E8FEB86659FD93)
		id := string(b[:])
		if i%7 == 0 {
			id += fmt.Sprint("-", i) // longer than 24 bytes: prefix and xxhash
		}
		keys = append(keys, keyOf(id))
	}
	for i := range keys {
		m := mark(i%2 + 1)
		tb.set(&keys[i], m, 0)
		want[keys[i]] = m
		if i%4000 == 3999 || i == len(keys)-1 {
			for j := range keys {
				gm, ok := tb.get(&keys[j])
				if j <= i && (!ok || gm != want[keys[j]]) {
					t.Fatalf("after %d ids: id %d has mark %v (held %v), want %v", i+1, j, gm, ok, want[keys[j]])
				}
				if j > i && ok {
					t.Fatalf("after %d ids: id %d, not yet added, is held", i+1, j)
				}
			}
		}
	}
	if tb.len() != len(want) || idTableFull(tb.len(), len(tb.slots)) {
		t.Errorf("%d ids in %d slots, want %d ids in at most three quarters of the slots", tb.len(), len(tb.slots), len(want))
	}
	if got := tb.asMap(); len(got) != len(want) {
		t.Errorf("the slots hold %d ids, want %d", len(got), len(want))
	}
}

// TestIDTableSizedByHint: a table made for n ids holds them without
// growing (recentIDs makes each generation the size of the last).
func TestIDTableSizedByHint(t *testing.T) {
	for _, n := range []int{0, 1, 8, 9, 100, 5000} {
		var tb idTable
		var b [RequestIDLen]byte
		made := 0
		for i := range n + 1 {
			putRequestID(&b, 1, uint64(i))
			k := keyOf(string(b[:]))
			tb.set(&k, markTaken, n)
			if i == 0 {
				if size := len(tb.slots); idTableFull(n+1, size) || (size > idTableMinSlots && !idTableFull(n+1, size/2)) {
					t.Errorf("hint %d: %d slots, want the least power of two (at least %d) that holds %d ids", n, size, idTableMinSlots, n+1)
				}
				made = len(tb.slots)
			}
		}
		if len(tb.slots) != made {
			t.Errorf("hint %d: grew from %d to %d slots", n, made, len(tb.slots))
		}
	}
}

func BenchmarkRecentIDsTakeThenReconcile(b *testing.B) {
	var marks, ids recentIDs
	var buf [RequestIDLen]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		putRequestID(&buf, 1_700_000_000, uint64(i)*0x9E3779B97F4A7C15)
		id := string(buf[:])
		k, _, inCur := marks.lookupForTake(id, int64(i), 10_000_000)
		marks.record(k, markTaken, inCur, int64(i), 1<<13)
		ids.seen(id, int64(i), 600_000_000, 1<<13)
	}
}
