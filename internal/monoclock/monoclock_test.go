package monoclock

import (
	"testing"
	"time"
)

// TestNowAgreesWithTime: readings of Now and of Of(time.Now()) taken in
// turn never go back, are never zero, and the difference of two readings
// is bounded by the time.Now readings around them (same run, no
// wall-clock bound).
func TestNowAgreesWithTime(t *testing.T) {
	prev := Now()
	if prev <= 0 {
		t.Fatalf("Now() = %v, want > 0", prev)
	}
	for i := range 1000 {
		before := time.Now()
		a := Now()
		mid := time.Now()
		b := Now()
		after := time.Now()
		if a < prev || b < a {
			t.Fatalf("step %d: readings went back: %v, %v, %v", i, prev, a, b)
		}
		if ob, oa := Of(before), Of(after); a < ob || b > oa {
			t.Fatalf("step %d: readings %v, %v outside Of(time.Now()) around them, %v..%v", i, a, b, ob, oa)
		}
		if om := Of(mid); om < a || om > b {
			t.Fatalf("step %d: Of(time.Now()) = %v between readings %v and %v", i, om, a, b)
		}
		if d := b - a; d > after.Sub(before) {
			t.Fatalf("step %d: b - a = %v, more than the %v around them", i, d, after.Sub(before))
		}
		if s := Since(a); s < b-a {
			t.Fatalf("step %d: Since(a) = %v < b - a = %v", i, s, b-a)
		}
		prev = b
	}
}

// TestOfSubtracts: Of maps time.Time values onto readings with their
// differences kept exactly.
func TestOfSubtracts(t *testing.T) {
	t0 := time.Now()
	t1 := t0.Add(1500 * time.Millisecond)
	if d := Of(t1) - Of(t0); d != 1500*time.Millisecond {
		t.Fatalf("Of(t0+1.5s) - Of(t0) = %v, want 1.5s", d)
	}
}

var (
	sinkD time.Duration
	sinkT time.Time
)

// BenchmarkNow is one monotonic reading.
func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		sinkD = Now()
	}
}

// BenchmarkTimeNow is time.Now, the wall and monotonic readings, for
// comparison in the same run.
func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		sinkT = time.Now()
	}
}
