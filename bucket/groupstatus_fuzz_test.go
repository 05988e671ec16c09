package bucket

import (
	"math"
	"testing"
	"time"
)

// FuzzStatusesBefore checks statusesBefore's token-bucket arithmetic
// against the scripts' own (runLevels' mirror of takeTokens: the units
// floored by scriptUnits, the reset by wait): for a bucket at level before
// a take of cost, the statuses the take reports (at level − cost), worked
// back, must give the level's own Remaining exactly and its Reset no
// earlier and at most 1 µs later. Quotas: Remaining plus the cost, Reset
// unchanged.
func FuzzStatusesBefore(f *testing.F) {
	f.Add(int64(100), int64(1), int64(1_000_000), 70.0, int64(10))
	f.Add(int64(10), int64(3), int64(1_000_000), 8.0, int64(1))
	f.Add(int64(10), int64(3), int64(1_000_000), 7.25, int64(2))
	f.Add(int64(1<<50), int64(1<<40), int64(1_000_000), float64(1<<49), int64(1500))
	f.Add(int64(1000), int64(7), int64(60_000_000), 999.999, int64(999))
	f.Fuzz(func(t *testing.T, capacity, rate, per int64, level float64, cost int64) {
		if capacity < 1 || capacity > maxExactUnits || rate < 1 || per < 1 || per > int64(24*time.Hour/time.Microsecond) ||
			cost < 0 || cost > capacity || math.IsNaN(level) || level < float64(cost) || level > float64(capacity) {
			t.Skip()
		}
		l := Limit{Capacity: capacity, Rate: rate, Per: time.Duration(per) * time.Microsecond}
		c, r, p := l.floats()
		after := level - float64(cost)
		reset := wait(after, c, r, p)
		if reset >= maxWait {
			t.Skip()
		}
		items := []Item{{Key: "k", Limit: l, Cost: cost}}
		buckets := []Status{{Remaining: int64(scriptUnits(after)), Reset: time.Duration(int64(reset)) * time.Microsecond}}
		if !statusesBefore(items, []int{0}, buckets, nil, nil) {
			t.Fatalf("a token bucket of capacity %d not worked out", capacity)
		}
		wantRemaining := int64(scriptUnits(level))
		wantReset := time.Duration(int64(wait(level, c, r, p))) * time.Microsecond
		got := buckets[0]
		if got.Remaining != wantRemaining || got.Reset < wantReset || got.Reset > wantReset+time.Microsecond {
			t.Fatalf("level %v, cost %d, %+v: worked out %+v, want %d and %v (up to 1µs later)", level, cost, l, got, wantRemaining, wantReset)
		}
		q := Quota(capacity, time.Unix(0, 0), time.Unix(86400, 0))
		qs := []Status{{Remaining: capacity - cost - 1, Reset: time.Hour}}
		if !statusesBefore([]Item{{Key: "q", Limit: q, Cost: cost}}, []int{0}, qs, nil, nil) || qs[0] != (Status{Remaining: capacity - 1, Reset: time.Hour}) {
			t.Fatalf("quota of %d, cost %d: %+v", capacity, cost, qs[0])
		}
	})
}
