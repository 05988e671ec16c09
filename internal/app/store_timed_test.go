package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/fakeclock"
)

// The memory store behind timed takes into the caller's statuses (no
// allocation per take, as the meter calls it) and every call is still
// observed in llmguard_store_duration_seconds{op}.
func TestTimedTakeIntoAllocatesNothing(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	reg := prometheus.NewRegistry()
	m := newStoreMetrics(reg)
	var s bucket.Store = timed{Store: mem, observe: m.observe}
	st, ok := s.(bucket.StatusTaker)
	if !ok {
		t.Fatal("timed hides the memory store's TakeInto")
	}
	lim := bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{{Key: "u", Limit: lim, Cost: 1}, {Key: "t", Limit: lim, Cost: 1}, {Key: "g", Limit: lim, Cost: 1}}
	var statuses [8]bucket.Status
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		d, err := st.TakeInto(ctx, "", items, statuses[:])
		if err != nil || !d.Allowed || &d.Buckets[0] != &statuses[0] {
			t.Fatalf("take: %+v %v", d, err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per take", n)
	}
	if err := s.Reconcile(ctx, "r1", []bucket.Delta{{Key: "u", Limit: lim, Units: -1}}); err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]uint64{"take": 201, "reconcile": 1} { // AllocsPerRun runs once more to warm up
		h, err := m.duration.GetMetricWithLabelValues(op)
		if err != nil {
			t.Fatal(err)
		}
		var got uint64
		if c, ok := h.(prometheus.Histogram); ok {
			got = histogramCount(t, c)
		}
		if got != want {
			t.Errorf("llmguard_store_duration_seconds{op=%q}: %d observations, want %d", op, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.duration); n != 2 {
		t.Errorf("%d series, want take and reconcile", n)
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var out dto.Metric
	if err := (<-ch).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

// slowStore is the memory store with every call held for hold first; held
// sums the holds, each measured around it.
type slowStore struct {
	*bucket.Memory
	hold time.Duration
	held time.Duration
}

func (s *slowStore) wait() {
	t0 := time.Now()
	time.Sleep(s.hold)
	s.held += time.Since(t0)
}

func (s *slowStore) TakeInto(ctx context.Context, id string, items []bucket.Item, statuses []bucket.Status) (bucket.Decision, error) {
	s.wait()
	return s.Memory.TakeInto(ctx, id, items, statuses)
}

func (s *slowStore) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	s.wait()
	return s.Memory.Reconcile(ctx, id, deltas)
}

// TestTimedObservesTheCall: what timed observes of a call is at least the
// time the store held it (measured around the hold, in the same run), and
// at most the time measured around the call.
func TestTimedObservesTheCall(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	m := newStoreMetrics(reg)
	lim := bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{{Key: "u", Limit: lim, Cost: 1}}
	ctx := context.Background()
	for _, op := range []string{"take", "reconcile"} {
		slow := &slowStore{Memory: bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1}), hold: 5 * time.Millisecond}
		s := timed{Store: slow, observe: m.observe}
		t0 := time.Now()
		var err error
		if op == "take" {
			var statuses [1]bucket.Status
			_, err = s.TakeInto(ctx, "", items, statuses[:])
		} else {
			err = s.Reconcile(ctx, "r1", []bucket.Delta{{Key: "u", Limit: lim, Units: -1}})
		}
		around := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		h, err := m.duration.GetMetricWithLabelValues(op)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan prometheus.Metric, 1)
		h.(prometheus.Histogram).Collect(ch)
		var out dto.Metric
		if err := (<-ch).Write(&out); err != nil {
			t.Fatal(err)
		}
		got := time.Duration(out.GetHistogram().GetSampleSum() * float64(time.Second))
		// The sum is a float of seconds: a nanosecond of rounding either way.
		if got < slow.held-time.Microsecond || got > around+time.Microsecond {
			t.Errorf("%s: observed %v, want between the store's hold %v and the %v around the call", op, got, slow.held, around)
		}
	}
}
