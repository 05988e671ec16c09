package proxy

import (
	"reflect"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// sameLimit answers as bucket.Limit's == for limits that differ in any
// one field (time.Time compared as == does: its wall clock, monotonic
// reading and location), and knows every field of the struct.
func TestSameLimitIsEqual(t *testing.T) {
	if n := reflect.TypeFor[bucket.Limit]().NumField(); n != 7 {
		t.Fatalf("bucket.Limit has %d fields; sameLimit compares 7: compare the new one", n)
	}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := bucket.Limit{Capacity: 1000, Rate: 10, Per: time.Second, WindowStart: start, WindowEnd: start.Add(time.Hour), Algorithm: bucket.SlidingWindow}
	variants := []func(*bucket.Limit){
		func(l *bucket.Limit) {},
		func(l *bucket.Limit) { l.Capacity++ },
		func(l *bucket.Limit) { l.Rate++ },
		func(l *bucket.Limit) { l.Per++ },
		func(l *bucket.Limit) { l.WindowStart = l.WindowStart.Add(time.Microsecond) },
		func(l *bucket.Limit) { l.WindowStart = l.WindowStart.In(time.FixedZone("x", 0)) }, // same instant, another location
		func(l *bucket.Limit) { l.WindowEnd = l.WindowEnd.Add(time.Microsecond) },
		func(l *bucket.Limit) { l.Concurrent = true },
		func(l *bucket.Limit) { l.Algorithm = bucket.FixedWindow },
	}
	for i, vi := range variants {
		for j, vj := range variants {
			x, y := base, base
			vi(&x)
			vj(&y)
			if got, want := sameLimit(&x, &y), x == y; got != want {
				t.Errorf("variants %d and %d: sameLimit %v, == %v", i, j, got, want)
			}
		}
	}
}
