package bucket

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// admission is one admitted take in a property run: when (µs), and its
// cost net of the reconciliation that followed it.
type admission struct {
	at  int64
	net int64
}

// TestAlgorithmBounds is the property test of each algorithm, through the
// Memory store and the Redis store (a redis-server): over random request
// sequences, costs and refunds (reconciled into the take's window), the
// net cost admitted never exceeds the algorithm's bound, and a denial
// never spends (neither the denying bucket nor the other bucket of the
// same take changes):
//
//	token bucket   any span [a, b]: Capacity + Rate × (b − a)/Per
//	fixed window   any aligned window: Capacity
//	sliding window any aligned window: Capacity; any span (t − Per, t]
//	               ending e into window k: Capacity + A(k−1) × e/Per,
//	               A(k−1) the net admitted in window k−1 (so < 2 × Capacity)
func TestAlgorithmBounds(t *testing.T) {
	stores := map[string]func(t *testing.T, now func() time.Time) Store{
		"memory": func(t *testing.T, now func() time.Time) Store {
			return NewMemory(MemoryOptions{Now: now, SweepEvery: -1})
		},
		// The shared redis-server, reset for each run: the Lua production
		// runs (miniredis's gopher-lua is held to it by the golden tables).
		"redis-server": func(t *testing.T, now func() time.Time) Store {
			r, err := NewRedis(RedisOptions{Client: redistest.Shared(t).Client(), Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	limits := []Limit{
		{Capacity: 100, Rate: 100, Per: time.Second},
		Window(FixedWindow, 100, time.Second),
		Window(SlidingWindow, 100, time.Second),
	}
	for name, open := range stores {
		for _, l := range limits {
			for seed := range uint64(3) {
				t.Run(fmt.Sprintf("%s/%s/%d", name, l.Algorithm, seed), func(t *testing.T) {
					log := runProperty(t, open, l, seed, 1500)
					checkBound(t, l, log)
				})
			}
		}
	}
}

// runProperty drives one store with random takes of a bucket under l and
// of a second, token bucket, in the same take, and random refunds of
// admitted takes, checking that a denial spends nothing; it returns the
// admissions of l's bucket.
func runProperty(t *testing.T, open func(t *testing.T, now func() time.Time) Store, l Limit, seed uint64, steps int) []admission {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 99))
	now := w0.Add(time.Duration(r.Int64N(1e6)) * time.Microsecond)
	store := open(t, func() time.Time { return now })
	other := Limit{Capacity: 150, Rate: 120, Per: time.Second}
	per := int64(l.Per / time.Microsecond)
	var log []admission
	statuses := func() []Status {
		d, err := store.Take(ctx, "", []Item{{Key: "p:{k}:a", Limit: l}, {Key: "p:{k}:b", Limit: other}})
		if err != nil || !d.Allowed {
			t.Fatalf("a zero take: %+v %v", d, err)
		}
		return d.Buckets
	}
	denials := 0
	last, lastWall := now, time.Now()
	for i := range steps {
		switch k := r.IntN(10); {
		case k < 6:
			now = now.Add(time.Duration(r.Int64N(per/8)) * time.Microsecond)
		case k < 7:
			now = now.Add(time.Duration(per-1-r.Int64N(per/50)) * time.Microsecond) // to just before a boundary, roughly
		}
		// Moved at least by the wall time since the last step, which
		// counts the keys' TTLs on a redis-server (see storetest.Pacer,
		// which this package's tests cannot import).
		wall := time.Now()
		if floor := last.Add(wall.Sub(lastWall)).Truncate(time.Microsecond); floor.After(now) {
			now = floor
		}
		last, lastWall = now, wall
		cost := 1 + r.Int64N(40)
		if r.IntN(10) == 0 {
			cost = 1 + r.Int64N(l.Capacity)
		}
		before := statuses()
		items := []Item{{Key: "p:{k}:a", Limit: l, Cost: cost}, {Key: "p:{k}:b", Limit: other, Cost: r.Int64N(30)}}
		id := fmt.Sprint("req-", i)
		d, err := store.Take(ctx, id, items)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !d.Allowed {
			denials++
			if after := statuses(); after[0] != before[0] || after[1] != before[1] {
				t.Fatalf("step %d: a denial spent: before %+v, after %+v", i, before, after)
			}
			if d.Buckets[0] != before[0] || d.Buckets[1] != before[1] {
				t.Fatalf("step %d: the denial reports %+v, the buckets are %+v", i, d.Buckets, before)
			}
			continue
		}
		a := admission{at: now.UnixMicro(), net: cost}
		if r.IntN(3) == 0 { // settle it now or a little later, for less than reserved
			refund := r.Int64N(cost + 1)
			if r.IntN(2) == 0 {
				now = now.Add(time.Duration(r.Int64N(per/2)) * time.Microsecond)
			}
			dl := Delta{Key: "p:{k}:a", Limit: l, Units: -refund}
			if l.IsWindow() {
				dl.Limit.WindowStart = d.Windows[0]
				_, _, wantStart := slide(0, 0, -1, per, a.at, false)
				if d.Windows[0].UnixMicro() != wantStart {
					t.Fatalf("step %d: the take reports window %v, want %d", i, d.Windows[0], wantStart)
				}
			}
			if err := store.Reconcile(ctx, "rc-"+id, []Delta{dl}); err != nil {
				t.Fatal(err)
			}
			// A refund counts against the take's window only: the net
			// admitted is what the bucket kept.
			if !l.IsWindow() || slideStart(now.UnixMicro(), per) == slideStart(a.at, per) ||
				(l.Algorithm == SlidingWindow && slideStart(now.UnixMicro(), per) == slideStart(a.at, per)+per) {
				a.net -= refund
			}
		}
		log = append(log, a)
	}
	if denials < steps/20 || len(log) < steps/5 {
		t.Fatalf("%d denials and %d admissions in %d steps: the run does not reach the bound", denials, len(log), steps)
	}
	return log
}

func slideStart(now, per int64) int64 { return now - now%per }

// checkBound checks l's bound over every span that ends at an admission.
func checkBound(t *testing.T, l Limit, log []admission) {
	t.Helper()
	per := int64(l.Per / time.Microsecond)
	c := l.Capacity
	sum := func(from, to int64) (s int64) { // net admitted in (from, to]
		for _, a := range log {
			if a.at > from && a.at <= to {
				s += a.net
			}
		}
		return s
	}
	worst := 0.0
	for j, end := range log {
		switch l.Algorithm {
		case TokenBucket:
			var got int64 // net admitted in [log[i].at, end.at]
			for i := j; i >= 0; i-- {
				got += log[i].net
				bound := float64(c) + float64(l.Rate)*float64(end.at-log[i].at)/float64(per)
				if float64(got) > bound {
					t.Fatalf("token bucket: %d admitted in [%d, %d], bound %.2f", got, log[i].at, end.at, bound)
				}
			}
		case FixedWindow, SlidingWindow:
			w := slideStart(end.at, per)
			if got := sum(w-1, w+per-1); got > c {
				t.Fatalf("%s: %d admitted in the window at %d, capacity %d", l.Algorithm, got, w, c)
			}
			span := sum(end.at-per, end.at)
			bound := 2 * float64(c)
			if l.Algorithm == SlidingWindow {
				bound = float64(c) + float64(sum(w-per-1, w-1))*float64(end.at-w)/float64(per)
			}
			if float64(span) > bound+1e-9 {
				t.Fatalf("%s: %d admitted in (%d, %d], bound %.3f", l.Algorithm, span, end.at-per, end.at, bound)
			}
			worst = max(worst, float64(span)/float64(c))
		}
	}
	if l.IsWindow() {
		t.Logf("%s: the most admitted in a span of per: %.2f × capacity", l.Algorithm, worst)
	}
}
