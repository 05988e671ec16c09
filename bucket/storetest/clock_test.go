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

// KeepUp keeps a step ahead of the wall clock as it is, and moves one
// behind it up to start plus the wall time since wallStart, in whole µs.
func TestKeepUp(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	wallStart := time.Now().Add(-time.Hour) // an hour of wall time has passed
	ahead := start.Add(2 * time.Hour)
	if got := KeepUp(ahead, start, wallStart); !got.Equal(ahead) {
		t.Errorf("ahead of the wall clock: %v, want %v", got, ahead)
	}
	behind := start.Add(time.Minute)
	got := KeepUp(behind, start, wallStart)
	if got.Before(start.Add(time.Hour)) || got.After(start.Add(time.Hour+time.Minute)) || got.Nanosecond()%1000 != 0 {
		t.Errorf("behind the wall clock: %v, want start + 1h (and a little), in whole µs", got)
	}
}
