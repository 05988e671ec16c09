package bucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// periodMover is a store that counts the reconciliations whose quota
// period it had already moved past (Memory and Redis).
type periodMover interface {
	Store
	PeriodMoved() uint64
}

// TestPeriodMovedIsCounted: a node whose clock still holds day 1 settles
// (and voids) a request of day 1 after the store has moved the quota to
// day 2 (another node, its clock past midnight, took in day 2 first; the
// store's own clock, pinned, is past midnight too). The delta applies to
// nothing, as before, and the store now counts it: once per reconciliation
// (a retry of its id counts nothing, nor does a delta of day 2 or a
// token bucket's), in Redis's lone layout, its batch layout and a batch of
// several elements alike, and in Memory.
func TestPeriodMovedIsCounted(t *testing.T) {
	day1 := time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)
	day2, day3 := day1.AddDate(0, 0, 1), day1.AddDate(0, 0, 2)
	today, tomorrow := Quota(10, day1, day2), Quota(10, day2, day3)
	rate := Limit{Capacity: 10, Rate: 1, Per: time.Second}
	storeNow := day2.Add(time.Second) // the store's clock: day 2 began

	run := func(t *testing.T, s periodMover, tag string) {
		ctx := context.Background()
		q, tb := tag+"q", tag+"t"
		step := 0
		want := func(n uint64, what string) {
			t.Helper()
			step++
			if got := s.PeriodMoved(); got != n {
				t.Fatalf("step %d (%s): PeriodMoved %d, want %d", step, what, got, n)
			}
		}
		take := func(id string, l Limit, cost int64) {
			t.Helper()
			if d, err := s.Take(ctx, id, []Item{{Key: q, Limit: l, Cost: cost}}); err != nil || !d.Allowed {
				t.Fatalf("take %s: %+v, %v", id, d, err)
			}
		}
		reconcile := func(id string, deltas ...Delta) {
			t.Helper()
			if err := s.Reconcile(ctx, id, deltas); err != nil {
				t.Fatalf("reconcile %s: %v", id, err)
			}
		}
		take(tag+"a", today, 4) // this node, day 1
		reconcile(NewRequestID(storeNow), Delta{Key: q, Limit: today, Units: 1})
		want(0, "a day 1 delta while the store holds day 1 applies")
		take(tag+"b", tomorrow, 2) // another node, day 2
		want(0, "a take counts nothing")
		late := NewRequestID(storeNow)
		reconcile(late, Delta{Key: q, Limit: today, Units: 3})
		want(1, "a late day 1 charge (lone layout) applies to nothing")
		reconcile(late, Delta{Key: q, Limit: today, Units: 3})
		want(1, "its retry counts nothing")
		reconcile(tag+"plain", Delta{Key: tb, Limit: rate, Units: 1}, Delta{Key: q, Limit: today, Units: -2})
		want(2, "a day 1 refund beside a token bucket's delta (batch layout)")
		reconcile(NewRequestID(storeNow), Delta{Key: q, Limit: tomorrow, Units: 1}, Delta{Key: tb, Limit: rate, Units: 1})
		want(2, "day 2's deltas apply")
		if err := s.Void(ctx, tag+"a", []Item{{Key: q, Limit: today, Cost: 4}}); err != nil {
			t.Fatal(err)
		}
		want(3, "the void of day 1's take applies to nothing")
		if b, ok := s.(BatchReconciler); ok {
			errs := b.ReconcileBatch(ctx, []Reconciliation{
				{RequestID: NewRequestID(storeNow), Deltas: []Delta{{Key: q, Limit: today, Units: 5}}},
				{RequestID: NewRequestID(storeNow), Deltas: []Delta{{Key: q, Limit: tomorrow, Units: 1}}},
				{RequestID: NewRequestID(storeNow), Deltas: []Delta{{Key: tb, Limit: rate, Units: -1}}},
				{RequestID: NewRequestID(storeNow), Deltas: []Delta{{Key: q, Limit: today, Units: -1}, {Key: tb, Limit: rate, Units: 1}}},
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("batch element %d: %v", i, err)
				}
			}
			want(5, "a batch: its two day 1 elements")
		}
		d, err := s.Take(ctx, "", []Item{{Key: q, Limit: tomorrow, Cost: 0}})
		if err != nil {
			t.Fatal(err)
		}
		wantLeft := int64(6) // 10 − 2 taken − 1 and 1 charged, day 1's units nowhere
		if _, ok := s.(BatchReconciler); !ok {
			wantLeft = 7
		}
		if got := d.Buckets[0].Remaining; got != wantLeft {
			t.Fatalf("day 2 has %d left, want %d: a day 1 delta reached it", got, wantLeft)
		}
	}

	t.Run("memory", func(t *testing.T) {
		m := NewMemory(MemoryOptions{Now: func() time.Time { return storeNow }, SweepEvery: -1})
		defer m.Close()
		run(t, m, "m")
	})
	redisStore := func(t *testing.T, c *redis.Client, generic bool) *Redis {
		r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return storeNow }})
		if err != nil {
			t.Fatal(err)
		}
		r.rcGeneric = generic
		return r
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		run(t, redisStore(t, c, false), "{mr}")
	})
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis-server/generic=%v", generic), func(t *testing.T) {
			c := redistest.Shared(t).Client()
			run(t, redisStore(t, c, generic), fmt.Sprintf("{pm%d-%v}", time.Now().UnixNano(), generic))
		})
	}
}
