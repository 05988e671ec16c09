package region

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// heavyIn loads region with about 1500 tokens a second and every other
// region with 20 (a fifth of the limit).
func heavyIn(rng *rand.Rand, region string) func(n *node) {
	return func(n *node) {
		if n.region == region {
			n.ask(1 + rng.Int64N(150))
		} else {
			n.ask(1)
		}
	}
}

// eachHolds fails the test unless every node of region holds share.
func (w *world) eachHolds(when, region string, share int64) {
	w.t.Helper()
	for _, n := range w.inRegion(region) {
		if n.share() != share {
			w.t.Errorf("%s: %s holds %s, want %s", when, n.name, ppm(n.share()), ppm(share))
		}
	}
}

// A partition leaves the shares safe. Cut both ways, no node can read
// every region, so the plan stays where it was and each region keeps
// applying its own record, whatever the load does. Cut one way, the nodes
// that see every region move the plan, and the cut-off region applies its
// shrink from its own Redis. Healed, the exchange goes on.
func TestRegionsPartitionKeepsSharesSafe(t *testing.T) {
	w := exchangeWorld(t, 2)
	rng := rand.New(rand.NewPCG(14, 15))
	w.run(14*time.Second, nil, nil, nil)
	w.run(20*time.Second, heavyIn(rng, "eu"), nil, nil)
	w.eachHolds("eu heavy", "eu", 750_000)
	w.eachHolds("eu heavy", "us", 250_000)
	before, _ := w.plan()

	for _, n := range w.nodes {
		for _, r := range w.regions() {
			n.cut(r, r != n.region)
		}
	}
	w.run(40*time.Second, heavyIn(rng, "us"), nil, nil)
	if p, _ := w.plan(); p.Epoch != before.Epoch {
		t.Errorf("cut both ways: the plan moved from %v to %v", before, p)
	}
	w.eachHolds("cut both ways, us heavy", "eu", 750_000)
	w.eachHolds("cut both ways, us heavy", "us", 250_000)
	if n := w.nodes[0]; n.step() == nil {
		t.Errorf("cut both ways: a step reported no failure")
	}

	for _, n := range w.inRegion("us") {
		n.cut("eu", false) // us sees both regions; eu still only itself
	}
	w.run(40*time.Second, heavyIn(rng, "us"), nil, nil)
	if p, _ := w.plan(); p.Shares[0] != 250_000 || p.Shares[1] != 750_000 {
		t.Errorf("cut one way: plan %v, want the us nodes to have moved it to eu 0.25, us 0.75", p)
	}
	w.eachHolds("cut one way, us heavy", "eu", 250_000)
	w.eachHolds("cut one way, us heavy", "us", 750_000)

	for _, n := range w.nodes {
		for _, r := range w.regions() {
			n.cut(r, false)
		}
	}
	w.run(40*time.Second, heavyIn(rng, "eu"), nil, nil)
	w.eachHolds("healed, eu heavy", "eu", 750_000)
	w.eachHolds("healed, eu heavy", "us", 250_000)
	w.checkWindows("", 0)
}

// A region's Redis that loses its data (a restart without persistence)
// loses that region's share record: its nodes hold the floor until the
// record, written again, reaches back a whole lookback; a node that cannot
// read its record at all falls to the floor when its read runs out. The
// coordinating region's loss takes the plan too: it restarts at every
// region's floor and climbs back with demand. The shares stay safe
// throughout. (The buckets lost with the data start full again, as after
// any Redis restart without persistence: the reference is told so.)
func TestRegionsRedisLossIsSafe(t *testing.T) {
	w := exchangeWorld(t, 1)
	rng := rand.New(rand.NewPCG(16, 17))
	down := map[string]bool{}
	load := func(n *node) {
		if !down[n.region] {
			heavyIn(rng, "eu")(n)
		}
	}
	// One node per region: us asks 10 tokens a second, needs 12.5%.
	w.run(14*time.Second, nil, nil, nil)
	w.run(20*time.Second, load, nil, nil)
	w.eachHolds("eu heavy", "eu", 875_000)
	w.eachHolds("eu heavy", "us", 125_000)

	// us's Redis dies: us cannot read its record and falls to the floor
	// within two intervals; nobody can move the plan.
	before, _ := w.plan()
	w.servers["us"].Kill()
	down["us"] = true
	w.run(2500*time.Millisecond, load, nil, nil)
	w.eachHolds("us's Redis down", "us", 100_000)
	w.eachHolds("us's Redis down", "eu", 875_000)
	w.servers["us"].Restart()
	down["us"] = false
	w.lost("us")
	// The record comes back as a new history: the floor for 13 s, then
	// the plan's share.
	w.run(12*time.Second, load, nil, nil)
	w.eachHolds("12 s after us's Redis came back empty", "us", 100_000)
	w.run(3*time.Second, load, nil, nil)
	w.eachHolds("15 s after us's Redis came back empty", "us", 125_000)
	if p, _ := w.plan(); p.Epoch <= before.Epoch {
		t.Errorf("the plan did not move on after us's Redis came back: %v, before %v", p, before)
	}

	// The coordinating region (eu) loses its data: its record and the
	// plan. A new plan starts at every region's floor, written as shrinks.
	w.servers["eu"].Kill()
	w.servers["eu"].Restart()
	w.lost("eu")
	w.run(time.Second, load, nil, nil)
	p, _ := w.plan()
	if p.Shares[0] != 100_000 || p.Shares[1] != 100_000 || p.Epoch <= before.Epoch {
		t.Errorf("after the plan was lost: %v, want a later epoch at both floors", p)
	}
	w.eachHolds("after the plan was lost", "us", 100_000)
	w.eachHolds("after the plan was lost", "eu", 100_000)
	w.run(30*time.Second, load, nil, nil)
	w.eachHolds("30 s later, eu heavy", "eu", 875_000)
	w.eachHolds("30 s later, eu heavy", "us", 125_000)
}

// lost tells the reference that region's Redis lost its data: its bucket
// starts full at the region's σ again, as any bucket does after a Redis
// restart without persistence.
func (w *world) lost(region string) {
	w.ref.level[region] = float64(w.opt.Burst) * float64(w.ref.sigma[region]) / PPMTest
}

// Replication writes no grown share until every shrunk one is written:
// with the shrinking region out of reach, the growing one keeps its old
// epoch; once it is back, both take the new one.
func TestReplicationWritesGrowsAfterShrinks(t *testing.T) {
	w := exchangeWorld(t, 1)
	w.run(14*time.Second, nil, nil, nil)
	eu := w.inRegion("eu")[0]
	r := eu.rule()
	recs := []*record{w.record("eu"), w.record("us")}
	next := plan{Epoch: recs[0].Epoch + 1, Shares: []int64{600_000, 400_000}}
	eu.cut("us", true)
	if err := eu.x.replicate(context.Background(), r, next, recs); err == nil {
		t.Fatal("replicated with the shrinking region out of reach")
	}
	if got := w.record("eu"); got.Epoch != recs[0].Epoch || got.Current() != 500_000 {
		t.Fatalf("the growing region's record moved on before the shrinking one: %+v", got)
	}
	eu.cut("us", false)
	if err := eu.x.replicate(context.Background(), r, next, recs); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"eu", "us"} {
		if got := w.record(name); got.Epoch != next.Epoch || got.Current() != next.Shares[i] {
			t.Errorf("%s's record %+v, want epoch %d share %s", name, got, next.Epoch, ppm(next.Shares[i]))
		}
	}
}
