package storetest

import (
	"testing"
	"time"
)

func TestClockOnSet(t *testing.T) {
	c := NewClock(Start)
	var seen []time.Time
	c.OnSet(func(t time.Time) { seen = append(seen, t) })
	c.Set(Start.Add(time.Second))
	c.Set(Start.Add(-time.Second)) // back in time is allowed
	want := []time.Time{Start, Start.Add(time.Second), Start.Add(-time.Second)}
	if len(seen) != len(want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
	for i := range want {
		if !seen[i].Equal(want[i]) {
			t.Fatalf("hook saw %v, want %v", seen, want)
		}
	}
	if !c.Now().Equal(want[2]) {
		t.Fatalf("Now() = %v, want %v", c.Now(), want[2])
	}
}

// A Pacer keeps a step that moves further than the wall clock as it is,
// and moves one that moves less (or goes back) by the wall time since the
// last step, in whole µs, whether the clock is ahead of the wall clock or
// behind it.
func TestPacer(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewPacer(start)
	ahead := start.Add(2 * time.Hour)
	if got := p.Step(ahead); !got.Equal(ahead) {
		t.Errorf("a step of 2 h: %v, want %v", got, ahead)
	}
	// The clock now leads the wall clock by about 2 h; a stall of an hour
	// must still move it an hour (KeepUp, before, moved it not at all).
	p.lastWall = p.lastWall.Add(-time.Hour)
	got := p.Step(ahead.Add(time.Millisecond))
	if got.Before(ahead.Add(time.Hour)) || got.After(ahead.Add(time.Hour+time.Minute)) || got.Nanosecond()%1000 != 0 {
		t.Errorf("a step of 1 ms after an hour's stall: %v, want the last step + 1h (and a little), in whole µs", got)
	}
	if back := p.Step(start); back.Before(got) {
		t.Errorf("a step back to the start: %v, want at least the last step %v", back, got)
	}
}
