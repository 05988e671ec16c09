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
