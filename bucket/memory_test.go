package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

func TestMemoryContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: time.Millisecond})
		t.Cleanup(func() { m.Close() })
		return m
	})
}

var tenPerSecond = bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second} // 1 unit per 100ms

func TestMemoryForgetsFullBuckets(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer m.Close()
	take := func(key string, cost int64) {
		t.Helper()
		if _, err := m.Take(ctx, "", []bucket.Item{{Key: key, Limit: tenPerSecond, Cost: cost}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []struct {
		name     string
		at       time.Duration
		do       func()
		sweep    bool
		wantHeld int
	}{
		{name: "reading a new bucket stores nothing", at: 0, do: func() { take("a", 0) }, wantHeld: 0},
		{name: "a take stores the bucket", at: 0, do: func() { take("a", 4) }, wantHeld: 1},
		{name: "not full 1µs before its reset", at: 400*time.Millisecond - time.Microsecond, sweep: true, wantHeld: 1},
		{name: "full at its reset", at: 400 * time.Millisecond, sweep: true, wantHeld: 0},
		{name: "take again", at: time.Second, do: func() { take("b", 3) }, wantHeld: 1},
		{name: "a refund that fills it drops it at once", at: time.Second, do: func() {
			if err := m.Reconcile(ctx, "r1", []bucket.Delta{{Key: "b", Limit: tenPerSecond, Units: -3}}); err != nil {
				t.Fatal(err)
			}
		}, wantHeld: 0},
		{name: "taken again: the bucket is back", at: time.Second, do: func() { take("b", 3) }, wantHeld: 1},
		{name: "refunded to full again", at: time.Second, do: func() {
			if err := m.Reconcile(ctx, "r2", []bucket.Delta{{Key: "b", Limit: tenPerSecond, Units: -3}}); err != nil {
				t.Fatal(err)
			}
		}, wantHeld: 0},
		{name: "the sweep lets the full bucket's entry go", at: time.Second, sweep: true, wantHeld: 0},
	} {
		clock.Set(storetest.Start.Add(s.at))
		if s.do != nil {
			s.do()
		}
		if s.sweep {
			m.Sweep()
		}
		if got, _ := m.Held(); got != s.wantHeld {
			t.Errorf("step %d (%s): %d buckets held, want %d", i+1, s.name, got, s.wantHeld)
		}
		if s.sweep && m.Slots() != s.wantHeld {
			t.Errorf("step %d (%s): %d entries after the sweep, want %d", i+1, s.name, m.Slots(), s.wantHeld)
		}
	}
}

func TestMemoryForgetsRequestIDs(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1, DedupFor: 10 * time.Minute})
	defer m.Close()
	// Each application of r1 charges 1 unit to a bucket that refills 1 a day.
	slow := bucket.Limit{Capacity: 100, Rate: 1, Per: 24 * time.Hour}
	for i, s := range []struct {
		name          string
		at            time.Duration
		wantRemaining int64
		wantIDs       int
	}{
		{name: "applied", at: 0, wantRemaining: 99, wantIDs: 1},
		{name: "retry within the window", at: 10*time.Minute - time.Microsecond, wantRemaining: 99, wantIDs: 1},
		{name: "still remembered just past the window", at: 10 * time.Minute, wantRemaining: 99, wantIDs: 1},
		{name: "still remembered in the older generation", at: 20*time.Minute - time.Microsecond, wantRemaining: 99, wantIDs: 1},
		{name: "forgotten after two windows: applies again", at: 30 * time.Minute, wantRemaining: 98, wantIDs: 1},
	} {
		clock.Set(storetest.Start.Add(s.at))
		m.Sweep()
		if err := m.Reconcile(ctx, "r1", []bucket.Delta{{Key: "a", Limit: slow, Units: 1}}); err != nil {
			t.Fatal(err)
		}
		d, err := m.Take(ctx, "", []bucket.Item{{Key: "a", Limit: slow}})
		if err != nil {
			t.Fatal(err)
		}
		_, ids := m.Held()
		if d.Buckets[0].Remaining != s.wantRemaining || ids != s.wantIDs {
			t.Errorf("step %d (%s): remaining %d with %d ids held, want %d with %d",
				i+1, s.name, d.Buckets[0].Remaining, ids, s.wantRemaining, s.wantIDs)
		}
	}
	clock.Set(storetest.Start.Add(time.Hour))
	m.Sweep()
	m.Sweep()
	if _, ids := m.Held(); ids != 0 {
		t.Errorf("an idle hour later %d ids are held, want 0", ids)
	}
}

func TestMemoryBoundsRequestIDs(t *testing.T) {
	m := bucket.NewMemory(bucket.MemoryOptions{Now: storetest.NewClock(storetest.Start).Now, Shards: 2, SweepEvery: -1, MaxRequestIDs: 64})
	defer m.Close()
	for i := range 10_000 {
		err := m.Reconcile(context.Background(), fmt.Sprint("req-", i), []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: 0}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, ids := m.Held(); ids > 64 || ids < 32 {
		t.Fatalf("%d request ids held, want between 32 and the bound 64", ids)
	}
}

func TestMemoryFailsOnDoneContext(t *testing.T) {
	m := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Take(ctx, "", []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Take: err = %v, want context.Canceled", err)
	}
	if err := m.Reconcile(ctx, "r1", []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: 1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Reconcile: err = %v, want context.Canceled", err)
	}
	if held, ids := m.Held(); held != 0 || ids != 0 {
		t.Errorf("a failed call left %d buckets and %d ids", held, ids)
	}
}

func TestMemoryCloseStopsSweep(t *testing.T) {
	m := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: time.Millisecond})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	d, err := m.Take(context.Background(), "", []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}})
	if err != nil || !d.Allowed {
		t.Fatalf("Take after Close: %+v, %v; want allowed", d, err)
	}
}

// TestMemoryTakeIntoAllocatesNothing: a take of existing buckets into the
// caller's statuses, and its reconciliation, allocate nothing (the memory
// store's share of a request's path).
func TestMemoryTakeIntoAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	m := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
	defer m.Close()
	roomy := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{{Key: "llmguard:{t}:u:alice", Limit: roomy, Cost: 300}, {Key: "llmguard:{t}:t:t", Limit: roomy, Cost: 300},
		{Key: "llmguard:{global}:g", Limit: roomy, Cost: 1}}
	deltas := []bucket.Delta{{Key: items[0].Key, Limit: roomy, Units: -300}, {Key: items[1].Key, Limit: roomy, Units: -300}}
	var statuses [4]bucket.Status
	once := func() {
		d, err := m.TakeInto(ctx, "", items, statuses[:])
		if err != nil || !d.Allowed || &d.Buckets[0] != &statuses[0] {
			t.Fatalf("%+v, %v", d, err)
		}
		if err := m.Reconcile(ctx, "", deltas); err != nil { // back to full: tombstones
			t.Fatal(err)
		}
	}
	once()
	if n := testing.AllocsPerRun(100, once); n != 0 {
		t.Errorf("%v allocations per take and reconciliation, want 0", n)
	}
}
