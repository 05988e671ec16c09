package region

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Without the exchange, each region enforces its configured share alone:
// over any window a region admits at most its share of burst + rate ×
// window, and the regions together at most the whole limit's; a saturated
// region admits close to its share (it is held to it, not starved). With
// every region's store wrongly pointed at one Redis, the keys that name
// the region keep the shares apart: never over-admission by
// misconfiguration.
func TestRegionsEnforceTheirShareLocally(t *testing.T) {
	for _, one := range []bool{false, true} {
		name := "own Redis each"
		if one {
			name = "one Redis for both (misconfigured)"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, worldOptions{Regions: map[string]float64{"eu": 0.7, "us": 0.3}, NodesPerRegion: 2,
				Burst: 1000, Rate: 100, OneRedis: one})
			rng := rand.New(rand.NewPCG(5, 6))
			const ticks = 600 // 60 s of 100 ms
			// About 300 tokens asked per tick, 10 refilled.
			w.run(ticks*100*time.Millisecond, func(n *node) { n.ask(1 + rng.Int64N(150)) }, nil, nil)
			w.checkWindows("", 0)
			w.checkWindows("eu", 700_000)
			w.checkWindows("us", 300_000)
			elapsed := int64(ticks / 10)
			for r, share := range map[string]int64{"eu": 7, "us": 3} {
				whole := share * (1000 + 100*elapsed) / 10 // its share of burst + rate × run
				if got := w.admitted(r); got < whole-150 || got > whole {
					t.Errorf("%s admitted %d over the run, want its share %d (less at most one request of 150)", r, got, whole)
				}
			}
		})
	}
}
