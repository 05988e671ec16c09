package weigher

import (
	"sync"
	"testing"
)

// slotsOfOneSet returns n distinct slots that t files in one set.
func slotsOfOneSet(t *countTable, n int) []uint64 {
	var slots []uint64
	want := t.set(0)
	for s := uint64(0); len(slots) < n; s += 0x9e3779b97f4a7c15 >> 20 {
		if t.set(s) == want {
			slots = append(slots, s)
		}
	}
	return slots
}

// holds reports whether t holds an entry under slot, without marking it
// read (as Get does).
func (t *countTable) holds(slot uint64) bool {
	s := t.set(slot)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.ways {
		if s.used&(1<<i) != 0 && s.ways[i].slot == slot {
			return true
		}
	}
	return false
}

// TestCountTableClock: a full set gives up the entry its hand reaches
// first among those not read since it last passed, so an entry read once
// outlives those written after it and not read, and entries written once
// go oldest first.
func TestCountTableClock(t *testing.T) {
	tab := newCountTable(64 * countWays)
	slots := slotsOfOneSet(tab, 3*countWays)
	for i, s := range slots[:countWays] {
		tab.Add(s, entry{t: tally{text: int64(i)}, counted: true})
	}
	if e, ok := tab.Get(slots[0]); !ok || e.t.text != 0 {
		t.Fatalf("entry 0 of a full set: %+v, %v", e, ok)
	}
	// Seven more: the seven unread go, oldest first (the hand passes
	// entry 0 once, clearing its mark).
	for i, s := range slots[countWays : 2*countWays-1] {
		tab.Add(s, entry{t: tally{text: int64(countWays + i)}, counted: true})
		for j := 1; j < countWays; j++ {
			if ok := tab.holds(slots[j]); ok != (j > i+1) {
				t.Fatalf("after %d more writes, entry %d held %v", i+1, j, ok)
			}
		}
	}
	if !tab.holds(slots[0]) {
		t.Error("the entry read before the set filled again was evicted")
	}
	// One more: entry 0, its mark cleared, is the next the hand reaches.
	tab.Add(slots[2*countWays-1], entry{counted: true})
	if tab.holds(slots[0]) || !tab.holds(slots[countWays]) {
		t.Errorf("after a second round: entry 0 held %v, entry %d held %v", tab.holds(slots[0]), countWays, tab.holds(slots[countWays]))
	}
	if got := tab.Len(); got != countWays {
		t.Errorf("Len %d, want %d (one set full)", got, countWays)
	}
	tab.Purge()
	if _, ok := tab.Get(slots[0]); ok || tab.Len() != 0 {
		t.Errorf("after Purge: entry held %v, Len %d", ok, tab.Len())
	}
}

// TestCountTableConcurrent writes and reads one table from several
// goroutines (run it with -race): every entry read is one written under
// its slot, and the table never holds more than its ways.
func TestCountTableConcurrent(t *testing.T) {
	tab := newCountTable(256)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20_000 {
				s := uint64(i%1000)*0x9e3779b97f4a7c15 + uint64(g)
				if e, ok := tab.Get(s); ok && e.ctx != s {
					t.Errorf("slot %x held the entry of %x", s, e.ctx)
					return
				}
				tab.Add(s, entry{ctx: s, counted: true})
			}
		}()
	}
	wg.Wait()
	if n := tab.Len(); n > len(tab.sets)*countWays || n <= 0 {
		t.Errorf("Len %d of %d ways", n, len(tab.sets)*countWays)
	}
}
