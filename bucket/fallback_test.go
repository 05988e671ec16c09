package bucket_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

func TestScaleLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit bucket.Limit
		nodes int
		want  bucket.Limit
	}{
		{name: "divides evenly", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4,
			want: bucket.Limit{Capacity: 25, Rate: 10, Per: time.Second}},
		{name: "rounds down", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Minute}, nodes: 3,
			want: bucket.Limit{Capacity: 33, Rate: 13, Per: time.Minute}},
		{name: "one node keeps the limit", limit: bucket.Limit{Capacity: 7, Rate: 3, Per: time.Hour}, nodes: 1,
			want: bucket.Limit{Capacity: 7, Rate: 3, Per: time.Hour}},
		{name: "no nodes counts as one", limit: bucket.Limit{Capacity: 7, Rate: 3, Per: time.Hour}, nodes: 0,
			want: bucket.Limit{Capacity: 7, Rate: 3, Per: time.Hour}},
		{name: "floor of one unit", limit: bucket.Limit{Capacity: 2, Rate: 1, Per: time.Second}, nodes: 4,
			want: bucket.Limit{Capacity: 1, Rate: 1, Per: time.Second}},
		{name: "largest limit", limit: bucket.Limit{Capacity: 1 << 53, Rate: 1 << 53, Per: time.Microsecond}, nodes: 8,
			want: bucket.Limit{Capacity: 1 << 50, Rate: 1 << 50, Per: time.Microsecond}},
	} {
		if got := bucket.ScaleLimit(tc.limit, tc.nodes); got != tc.want {
			t.Errorf("%s: ScaleLimit(%+v, %d) = %+v, want %+v", tc.name, tc.limit, tc.nodes, got, tc.want)
		}
	}
}

func TestOverAdmissionOf(t *testing.T) {
	for _, tc := range []struct {
		name                string
		limit               bucket.Limit
		nodes               int
		maxCost             int64
		burst, rate, factor float64
	}{
		// Every node's fresh bucket holds a quarter: together one burst,
		// on top of the shared burst spent just before the outage.
		{name: "even split", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4,
			burst: 1, rate: 1, factor: 2},
		{name: "one node", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 1,
			burst: 1, rate: 1, factor: 2},
		{name: "rounding down admits less", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 3,
			burst: 0.99, rate: 0.975, factor: 1.99},
		// A limit below the node count: each node still admits one unit.
		{name: "floor of one unit", limit: bucket.Limit{Capacity: 2, Rate: 1, Per: time.Second}, nodes: 4,
			burst: 2, rate: 4, factor: 4},
		// Requests above a node's share, each admitted from a full bucket.
		{name: "large requests", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4, maxCost: 60,
			burst: 2.4, rate: 1, factor: 3.4},
		{name: "cost capped at capacity", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4, maxCost: 500,
			burst: 4, rate: 1, factor: 5},
		{name: "small requests change nothing", limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4, maxCost: 5,
			burst: 1, rate: 1, factor: 2},
	} {
		o := bucket.OverAdmissionOf(tc.limit, tc.nodes, tc.maxCost)
		if !near(o.Burst, tc.burst) || !near(o.Rate, tc.rate) || !near(o.Factor, tc.factor) {
			t.Errorf("%s: OverAdmissionOf = burst %v rate %v factor %v, want %v %v %v",
				tc.name, o.Burst, o.Rate, o.Factor, tc.burst, tc.rate, tc.factor)
		}
		if o.Node != bucket.ScaleLimit(tc.limit, tc.nodes) {
			t.Errorf("%s: node limit %+v", tc.name, o.Node)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestFallbackTimeline walks one node's fallback bucket through fixed
// instants: it starts full at the node's share, refills at the node's rate,
// admits a request above its share only when full (leaving debt), refuses
// one above the limit as too large, and takes reconciliations in full.
func TestFallbackTimeline(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0)
	clock := storetest.NewClock(start)
	f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 4, Memory: bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1}})
	defer f.Close()
	limit := bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second} // a node: 25, 10/s
	take := func(cost int64) bucket.Decision {
		t.Helper()
		d, err := f.Take(ctx, "", []bucket.Item{{Key: "k", Limit: limit, Cost: cost}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	steps := []struct {
		name       string
		at         time.Duration
		cost       int64
		allowed    bool
		tooLarge   bool
		remaining  int64
		retryAfter time.Duration
	}{
		{name: "fresh bucket is full at the share", at: 0, cost: 25, allowed: true, remaining: 0},
		{name: "empty", at: 0, cost: 1, remaining: 0, retryAfter: 100 * time.Millisecond},
		{name: "refilled at the node's rate", at: 100 * time.Millisecond, cost: 1, allowed: true, remaining: 0},
		{name: "above the share, not full", at: 1 * time.Second, cost: 60, remaining: 9, retryAfter: 1600 * time.Millisecond},
		{name: "above the share, full: debt", at: 10 * time.Second, cost: 60, allowed: true, remaining: -35},
		{name: "debt is repaid first", at: 13 * time.Second, cost: 1, remaining: -5, retryAfter: 600 * time.Millisecond},
		{name: "above the limit", at: 20 * time.Second, cost: 101, tooLarge: true, remaining: 25},
	}
	for i, s := range steps {
		clock.Set(start.Add(s.at))
		d := take(s.cost)
		if d.Allowed != s.allowed || d.TooLarge != s.tooLarge || d.Buckets[0].Remaining != s.remaining || d.RetryAfter != s.retryAfter {
			t.Fatalf("step %d (%s): %+v; want allowed %v, too large %v, remaining %d, retry after %v",
				i, s.name, d, s.allowed, s.tooLarge, s.remaining, s.retryAfter)
		}
	}

	// A reconciliation applies its units in full to the node's bucket,
	// once per request id.
	clock.Set(start.Add(30 * time.Second))
	take(20) // 25 -> 5
	for range 2 {
		if err := f.Reconcile(ctx, "r1", []bucket.Delta{{Key: "k", Limit: limit, Units: -15}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := take(0); d.Buckets[0].Remaining != 20 {
		t.Fatalf("after a refund of 15 (twice, same id): %d remaining, want 20", d.Buckets[0].Remaining)
	}
}

// TestFallbackClusterBound simulates nodes serving one limit from their
// fallbacks through an outage, every node greedily taking every unit it
// can: the cluster admits exactly what OverAdmissionOf says beyond the
// shared bucket's burst, never more.
func TestFallbackClusterBound(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		limit bucket.Limit
		nodes int
	}{
		{limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 4},
		{limit: bucket.Limit{Capacity: 100, Rate: 40, Per: time.Second}, nodes: 3},
		{limit: bucket.Limit{Capacity: 2, Rate: 1, Per: time.Second}, nodes: 4},
	} {
		start := time.Unix(1_700_000_000, 0)
		clock := storetest.NewClock(start)
		nodes := make([]*bucket.Fallback, tc.nodes)
		for i := range nodes {
			nodes[i] = bucket.NewFallback(bucket.FallbackOptions{Nodes: tc.nodes, Memory: bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1}})
			defer nodes[i].Close()
		}
		o := bucket.OverAdmissionOf(tc.limit, tc.nodes, 0)
		var admitted int64
		const step, outage = 10 * time.Millisecond, 10 * time.Second
		for at := time.Duration(0); at <= outage; at += step {
			clock.Set(start.Add(at))
			for _, n := range nodes {
				for {
					d, err := n.Take(ctx, "", []bucket.Item{{Key: "k", Limit: tc.limit, Cost: 1}})
					if err != nil {
						t.Fatal(err)
					}
					if !d.Allowed {
						break
					}
					admitted++
				}
			}
			// What the cluster may admit by now: Burst × Capacity at once,
			// then Rate × the limit's rate.
			elapsed := float64(at) / float64(tc.limit.Per)
			bound := o.Burst*float64(tc.limit.Capacity) + o.Rate*float64(tc.limit.Rate)*elapsed
			if float64(admitted) > bound+1e-6 {
				t.Fatalf("%+v over %d nodes: %d admitted by %v, bound %.1f", tc.limit, tc.nodes, admitted, at, bound)
			}
			// And with the shared burst spent just before the outage, the
			// ratio to what the limit admits stays within Factor.
			if limit := float64(tc.limit.Capacity) + float64(tc.limit.Rate)*elapsed; float64(tc.limit.Capacity+admitted)/limit > o.Factor+1e-9 {
				t.Fatalf("%+v over %d nodes: ratio %.3f by %v above factor %.3f", tc.limit, tc.nodes,
					float64(tc.limit.Capacity+admitted)/limit, at, o.Factor)
			}
		}
		// The bound is reached: nodes × (share + share rate × outage).
		if want := int64(tc.nodes) * (o.Node.Capacity + o.Node.Rate*int64(outage/o.Node.Per)); admitted != want {
			t.Errorf("%+v over %d nodes: %d admitted over the outage, want %d", tc.limit, tc.nodes, admitted, want)
		}
	}
}
