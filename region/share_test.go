package region

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Next, step by step: the target follows unused share, and each share
// moves toward it by at most max_step.
func TestNextTimeline(t *testing.T) {
	const supply = 1000 // units per interval
	type step struct {
		name   string
		demand []int64
		want   []int64
	}
	run := func(t *testing.T, configured, floors []int64, maxStep int64, steps []step) {
		t.Helper()
		cur := slices.Clone(configured)
		for i, s := range steps {
			st := make([]Standing, len(cur))
			for j := range cur {
				st[j] = Standing{Share: cur[j], Demand: s.demand[j], Configured: configured[j], Floor: floors[j]}
			}
			cur = Next(st, supply, maxStep)
			if !slices.Equal(cur, s.want) {
				t.Fatalf("step %d (%s): shares %v, want %v", i, s.name, cur, s.want)
			}
		}
	}
	t.Run("two regions", func(t *testing.T) {
		// eu 0.5, us 0.5; floors 0.1; max_step 0.1.
		run(t, []int64{500_000, 500_000}, []int64{100_000, 100_000}, 100_000, []step{
			{name: "both idle: the configured split", demand: []int64{0, 0}, want: []int64{500_000, 500_000}},
			{name: "both over their share: the configured split", demand: []int64{5000, 900}, want: []int64{500_000, 500_000}},
			{name: "us asks 20% (needs 25%): eu grows by max_step", demand: []int64{5000, 200}, want: []int64{600_000, 400_000}},
			{name: "again", demand: []int64{5000, 200}, want: []int64{700_000, 300_000}},
			{name: "us's need is reached", demand: []int64{5000, 200}, want: []int64{750_000, 250_000}},
			{name: "us idle: down to its floor", demand: []int64{5000, 0}, want: []int64{850_000, 150_000}},
			{name: "at the floor", demand: []int64{5000, 0}, want: []int64{900_000, 100_000}},
			{name: "stays", demand: []int64{5000, 0}, want: []int64{900_000, 100_000}},
			{name: "load moves to us: us grows back by max_step", demand: []int64{0, 5000}, want: []int64{800_000, 200_000}},
			{name: "all idle: back toward the configured split", demand: []int64{0, 0}, want: []int64{700_000, 300_000}},
		})
	})
	t.Run("three regions, unequal", func(t *testing.T) {
		// eu 0.5, us 0.3, ap 0.1 (T = 0.9); floors min(0.05, share); max_step 0.1.
		run(t, []int64{500_000, 300_000, 100_000}, []int64{50_000, 50_000, 50_000}, 100_000, []step{
			{name: "ap idle, eu and us over: ap's share above its floor goes to them by configured share above floor (450:250)",
				demand: []int64{9000, 9000, 0}, want: []int64{532_142, 317_857, 50_000}},
			{name: "us asks 10% (needs 12.5%): eu takes what us leaves, max_step at a time",
				demand: []int64{9000, 100, 0}, want: []int64{632_142, 217_857, 50_000}},
			{name: "the target: us its need, eu the rest", demand: []int64{9000, 100, 0}, want: []int64{725_000, 125_000, 50_000}},
			{name: "settled", demand: []int64{9000, 100, 0}, want: []int64{725_000, 125_000, 50_000}},
			{name: "all over their share: toward the configured split; the growths (0.1, 0.05) scaled to what eu gives (0.1)",
				demand: []int64{9000, 9000, 9000}, want: []int64{625_000, 191_666, 83_333}},
		})
	})
}

// Next, on any valid input: the shares sum to at most the configured
// total, none moves more than max_step, each lies between its current
// share and its target (so never below its floor), and the same numbers
// give the same shares.
func TestNextInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := range 20000 {
		n := 1 + rng.IntN(5)
		regions := make([]Standing, n)
		var total int64
		for i := range regions {
			conf := 1 + rng.Int64N(1_000_000/int64(n))
			regions[i] = Standing{Configured: conf, Floor: 1 + rng.Int64N(conf)}
			total += conf
		}
		// A current split: floors plus a random part of the rest.
		rest := total
		for _, r := range regions {
			rest -= r.Floor
		}
		for i := range regions {
			g := rng.Int64N(rest + 1)
			if rng.IntN(3) == 0 {
				g = 0
			}
			regions[i].Share = regions[i].Floor + g
			rest -= g
			if rng.IntN(4) != 0 {
				regions[i].Demand = rng.Int64N(1 << uint(rng.IntN(40)))
			}
		}
		supply := 1 + rng.Int64N(1<<uint(rng.IntN(40)))
		maxStep := 1 + rng.Int64N(1_000_000)
		next := Next(regions, supply, maxStep)
		target := waterFill(regions, supply)
		var sum int64
		for i, r := range regions {
			sum += next[i]
			d := next[i] - r.Share
			if d > maxStep || -d > maxStep {
				t.Fatalf("case %d: region %d moved %d, more than max_step %d (%+v)", c, i, d, maxStep, regions)
			}
			if next[i] < min(r.Share, target[i]) || next[i] > max(r.Share, target[i]) {
				t.Fatalf("case %d: region %d: %d not between its share %d and its target %d", c, i, next[i], r.Share, target[i])
			}
			if next[i] < r.Floor {
				t.Fatalf("case %d: region %d below its floor: %d < %d", c, i, next[i], r.Floor)
			}
		}
		if sum > total {
			t.Fatalf("case %d: shares %v sum to %d, above the configured total %d (%+v)", c, next, sum, total, regions)
		}
		if !slices.Equal(next, Next(slices.Clone(regions), supply, maxStep)) {
			t.Fatalf("case %d: not deterministic", c)
		}
	}
}

// heldAt is the least share over the lookback, the floor when the
// history does not reach back that far.
func TestHeldAt(t *testing.T) {
	// Newest first: 0.8 written at 100, 0.6 at 60, 0.7 at 20, 0.5 at 0.
	h := []entry{{At: 100, Share: 800_000}, {At: 60, Share: 600_000}, {At: 20, Share: 700_000}, {At: 0, Share: 500_000}}
	for _, tc := range []struct {
		name          string
		history       []entry
		now, lookback int64
		want          int64
	}{
		{"the newest has held long enough", h, 200, 100, 800_000},
		{"a grow not yet held for the lookback: the share before it", h, 150, 60, 600_000},
		{"the least over the window", h, 110, 80, 600_000},
		{"a window reaching the oldest entry", h, 100, 100, 500_000},
		{"a history that does not reach back: the floor", h[:2], 100, 50, 100_000},
		{"a shrink is used at once", []entry{{At: 100, Share: 300_000}, {At: 0, Share: 500_000}}, 100, 100, 300_000},
		{"no record: the floor", nil, 100, 10, 100_000},
	} {
		if got := heldAt(tc.history, tc.now, tc.lookback, 100_000); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Plans and records read back what was written, and nothing else.
func TestPlanAndRecordFormats(t *testing.T) {
	p := plan{Epoch: 7, Interval: 1234, Shares: []int64{600_000, 400_000}}
	if got, ok := parsePlan(p.String(), 2, 1_000_000); !ok || got.String() != "7 1234 600000 400000" {
		t.Errorf("plan round trip: %v %v", got, ok)
	}
	for _, bad := range []string{"", "7 1234 600000", "7 1234 600000 500000", "-1 0 1 1", "x 0 1 1", "7 1234 600000 1000001"} {
		if _, ok := parsePlan(bad, 2, 1_000_000); ok {
			t.Errorf("plan %q parsed", bad)
		}
	}
	r, ok := parseRecord("3 1700000000000000 600000 1699999990000000 500000")
	if !ok || r.Epoch != 3 || r.Current() != 600_000 || len(r.History) != 2 || r.History[1].At != 1699999990000000 {
		t.Errorf("record: %+v %v", r, ok)
	}
	for _, bad := range []string{"", "3", "3 1 2 3", "3 x 1", "3 1 -5", "-3 1 1"} {
		if _, ok := parseRecord(bad); ok {
			t.Errorf("record %q parsed", bad)
		}
	}
}
