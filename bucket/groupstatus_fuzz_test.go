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
// earlier and at most 1 µs later than the script's, give or take the
// script's own rounding (resetSlack). Quotas: Remaining plus the cost,
// Reset unchanged.
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
		slack := time.Duration(resetSlack(c, r, p, wait(level, c, r, p))) * time.Microsecond
		if got.Remaining != wantRemaining || got.Reset < wantReset-slack || got.Reset > wantReset+time.Microsecond+slack {
			t.Fatalf("level %v, cost %d, %+v: worked out %+v, want %d and %v (up to 1µs later, ±%v of the script's rounding)", level, cost, l, got, wantRemaining, wantReset, slack)
		}
		q := Quota(capacity, time.Unix(0, 0), time.Unix(86400, 0))
		qs := []Status{{Remaining: capacity - cost - 1, Reset: time.Hour}}
		if !statusesBefore([]Item{{Key: "q", Limit: q, Cost: cost}}, []int{0}, qs, nil, nil) || qs[0] != (Status{Remaining: capacity - 1, Reset: time.Hour}) {
			t.Fatalf("quota of %d, cost %d: %+v", capacity, cost, qs[0])
		}
	})
}

// resetSlack is how many µs the script's wait for a bucket of capacity c,
// rate r and period p (µs) may stand off the exact ceiling of its real
// arithmetic (wait), at a wait of w µs: its level is a double (a level of
// 136/3 is held a little below it), so when the exact wait is a whole
// number of µs (23/3 × 1,000,026 µs) the script's is 1 µs more, and its
// level's and capacity's rounding (some 2 ulps of c) weighs p/r µs a unit,
// as does w's own ulp past 2^53. statusesBefore works in whole µs from the
// take's reply, so it can differ from the script by as much.
func resetSlack(c, r, p, w float64) float64 {
	return 1 + math.Ceil(4*ulp(c)*p/r) + math.Ceil(2*ulp(w))
}

// ulp is the gap between x (≥ 0) and the next double above it.
func ulp(x float64) float64 { return math.Nextafter(x, math.Inf(1)) - x }
