package proxy

import (
	"testing"
)

// TestClientWatchSlotsReused: an entry's slot is given to the next entry
// once the first is removed, and a remove under a flag whose slot another
// entry now holds (a second remove of it) drops nothing; the entries still
// watched are looked at and acted on, the removed ones never.
func TestClientWatchSlotsReused(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	p := r.px
	w := handSwept()
	conns := leftConns(t, 4)
	var flags [4]watchFlag
	var acts [4]countingAction
	add := func(i int) { w.add(p, &flags[i], watchSlot{conn: conns[i], action: &acts[i], every: 1}) }
	add(0)
	add(1)
	add(2)
	w.remove(&flags[1])
	add(3) // into entry 1's slot
	if flags[3].slot() != flags[1].slot() {
		t.Errorf("step 1 (reuse): entry 3 in slot %d, want the freed slot %d", flags[3].slot(), flags[1].slot())
	}
	w.remove(&flags[1]) // again: slot 1 is entry 3's now
	if w.n != 3 || w.fast != 3 {
		t.Fatalf("step 2 (stale remove): %d entries watched (%d fast), want 3 (3)", w.n, w.fast)
	}
	sweepOnce(t, w, p)
	for i, want := range []int32{1, 0, 1, 1} {
		if n := acts[i].calls.Load(); n != want {
			t.Errorf("step 3 (sweep): entry %d acted on %d times, want %d", i, n, want)
		}
	}
	if w.n != 0 || w.fast != 0 || len(w.slots) != 0 || len(w.free) != 0 {
		t.Errorf("step 4 (all gone): %d entries (%d fast), %d slots, %d free, want none", w.n, w.fast, len(w.slots), len(w.free))
	}
}

// BenchmarkClientWatchAddRemove is the watch's cost a request (a request
// body sent upstream is watched from its send to its answer head): one add
// and one remove among 32 other entries watched.
func BenchmarkClientWatchAddRemove(b *testing.B) {
	w := handSwept()
	var others [32]watchFlag
	act := &countingAction{}
	for i := range others {
		w.add(nil, &others[i], watchSlot{action: act, every: streamWatchTicks})
	}
	var f watchFlag
	b.ReportAllocs()
	for b.Loop() {
		w.add(nil, &f, watchSlot{action: act, every: streamWatchTicks})
		w.remove(&f)
	}
}

// TestWatchFlagKeepsBoth: the flag and the slot share one word; setting
// or clearing either leaves the other as it was.
func TestWatchFlagKeepsBoth(t *testing.T) {
	var f watchFlag
	f.setSlot(5)
	f.Store(true)
	if !f.Load() || f.slot() != 5 {
		t.Errorf("step 1 (flag set on slot 5): flag %v slot %d", f.Load(), f.slot())
	}
	f.setSlot(1<<31 - 1)
	if !f.Load() || f.slot() != 1<<31-1 {
		t.Errorf("step 2 (the largest slot, flag set): flag %v slot %d", f.Load(), f.slot())
	}
	f.Store(false)
	if f.Load() || f.slot() != 1<<31-1 {
		t.Errorf("step 3 (flag cleared): flag %v slot %d", f.Load(), f.slot())
	}
}
