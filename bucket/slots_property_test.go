package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The property of in-flight limits, over random sequences of takes (with
// a token bucket beside the slots, so that either may deny), releases,
// voids and waits past leases, on Memory and on a real redis-server (its
// clock pinned to the test's): the live holders never exceed the capacity,
// every verdict is the one a model of the holders gives, and a denial
// changes nothing (no holder added, no token taken).
func TestSlotsProperty(t *testing.T) {
	stores := map[string]func(t *testing.T, clock *storetest.Clock) bucket.Store{
		"memory": func(t *testing.T, clock *storetest.Clock) bucket.Store {
			m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
			t.Cleanup(func() { m.Close() })
			return m
		},
		"redis-server": func(t *testing.T, clock *storetest.Clock) bucket.Store {
			c := redistest.Shared(t).Client()
			return newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				slotsRun(t, newStore, seed)
			}
		})
	}
}

func slotsRun(t *testing.T, newStore func(t *testing.T, clock *storetest.Clock) bucket.Store, seed uint64) {
	t.Helper()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	store := newStore(t, clock)
	rng := rand.New(rand.NewPCG(seed, 99))
	lease := 10 * time.Second
	slots := bucket.Slots(3, lease)
	tokens := bucket.Limit{Capacity: 5, Rate: 1, Per: time.Second}
	pfx := fmt.Sprintf("prop-%d-%d:", seed, time.Now().UnixNano())
	items := func(cost int64) []bucket.Item {
		return []bucket.Item{{Key: pfx + "c", Limit: slots, Cost: cost}, {Key: pfx + "t", Limit: tokens, Cost: cost}}
	}
	held := map[string]time.Time{} // the model: holder → expiry
	live := func() int64 {
		n := int64(0)
		for _, exp := range held {
			if exp.After(clock.Now()) {
				n++
			}
		}
		return n
	}
	read := func() bucket.Decision {
		d, err := store.Take(ctx, "", items(0))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	denials, admits := 0, 0
	for step := 0; step < 300; step++ {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch op := rng.IntN(10); {
		case op < 6:
			id := fmt.Sprintf("%sr%d", pfx, step)
			before := read()
			d, err := store.Take(ctx, id, items(1))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			wantOK := live() < slots.Capacity && before.Buckets[1].Remaining >= 1
			if d.Allowed != wantOK {
				t.Fatalf("%s: allowed %v, the model says %v (live %d, tokens %d)", where, d.Allowed, wantOK, live(), before.Buckets[1].Remaining)
			}
			if d.Allowed {
				admits++
				held[id] = clock.Now().Add(lease)
			} else {
				denials++
				after := read()
				if after.Buckets[0] != before.Buckets[0] || after.Buckets[1].Remaining != before.Buckets[1].Remaining {
					t.Fatalf("%s: a denial changed state: %+v → %+v", where, before.Buckets, after.Buckets)
				}
			}
		case op < 8 && len(held) > 0:
			var id string
			for k := range held {
				id = k
				break
			}
			var err error
			if rng.IntN(2) == 0 {
				err = store.Reconcile(ctx, id, []bucket.Delta{{Key: pfx + "c", Limit: slots, Units: -1}})
			} else {
				err = store.Void(ctx, id, items(1)[:1])
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			delete(held, id)
		default:
			clock.Set(clock.Now().Add(time.Duration(rng.IntN(4000)) * time.Millisecond))
		}
		if got := read().Buckets[0].Remaining; got != slots.Capacity-live() || got < 0 {
			t.Fatalf("%s: %d slots free, the model says %d", where, got, slots.Capacity-live())
		}
	}
	if denials == 0 || admits == 0 {
		t.Fatalf("seed %d: %d admits, %d denials: the sequence tests nothing", seed, admits, denials)
	}
}
