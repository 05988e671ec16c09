package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// slotsStore is a store under TestSlotsProperty and, for a failure's
// message, what it holds under some keys (nil: nothing to show).
type slotsStore struct {
	bucket.Store
	inspect func(keys ...string) string
}

// The timing of TestSlotsProperty, in whole units of slotsUnit: a lease of
// 10 units, waits of 0 to 4 units, a token refilled a unit (so a token
// bucket's level is always a whole number), the void window (VoidFor) the
// lease. On a redis-server the scripts run at the test's pinned instant,
// but Redis counts each key's TTL on its own wall clock from the write: the
// in-flight key lives the lease + 1 s past its newest hold, a token key its
// time to full + 1 s (at least a unit + 1 s while not full), a take's
// marker for Void VoidFor. The test's clock stands still between its waits,
// so a TTL that ran out on the wall clock showed a state the model never
// had: with the first form's lease of 10 s and waits in ms, a stall of the
// test process (or a forward step of the wall clock) of 11 s between a hold
// and a read lost every holder ("seed 4 step 7: 3 slots free, the model
// says 0", CI under load; a SIGSTOP of 12 s at a random instant reproduces
// it), one of 10 s kept a voided holder (its take marker gone: no refund),
// one of 1 to 2 s showed a nearly full token bucket full. A unit of an
// hour puts every TTL past the test's timeout. Whole units also land the
// clock exactly on holders' expiries, the boundary (a holder counts while
// its expiry is after now) that waits in ms never reached.
const (
	slotsUnit  = time.Hour
	slotsLease = 10 * slotsUnit
)

// The property of in-flight limits, over random sequences of takes (with
// a token bucket beside the slots, so that either may deny), releases,
// voids and waits past leases, on Memory and on a real redis-server (its
// clock pinned to the test's): the live holders never exceed the capacity,
// every verdict is the one a model of the holders gives, and a denial
// changes nothing (no holder added, no token taken). A take that holds its
// slot is within its void window (VoidFor is the lease), so its Void
// releases the slot.
func TestSlotsProperty(t *testing.T) {
	stores := map[string]func(t *testing.T, clock *storetest.Clock) slotsStore{
		"memory": func(t *testing.T, clock *storetest.Clock) slotsStore {
			m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1, VoidFor: slotsLease})
			t.Cleanup(func() { m.Close() })
			return slotsStore{Store: m}
		},
		"redis-server": func(t *testing.T, clock *storetest.Clock) slotsStore {
			c := redistest.Shared(t).Client()
			return slotsStore{
				Store:   newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now, VoidFor: slotsLease}),
				inspect: func(keys ...string) string { return redisKeys(c, keys) },
			}
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

// redisKeys describes keys as c's server holds them (type, PTTL, value; a
// sorted set's members with their expiries, as offsets from
// storetest.Start) and the server's own clock (TIME, against this
// process's wall clock) and counters (expired keys, FLUSHALL and FLUSHDB
// calls since the test's reset), for a failure's message: what removed or
// changed a key the model still counts.
func redisKeys(c *redis.Client, keys []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil || typ == "none" {
			fmt.Fprintf(&b, "\n  %s: missing (%v)", k, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %s, pttl %v", k, typ, c.PTTL(ctx, k).Val())
		switch typ {
		case "zset":
			for _, z := range c.ZRangeWithScores(ctx, k, 0, -1).Val() {
				fmt.Fprintf(&b, " [%v +%v]", z.Member, time.Duration(int64(z.Score)-storetest.Start.UnixMicro())*time.Microsecond)
			}
		case "string":
			fmt.Fprintf(&b, " %q", c.Get(ctx, k).Val())
		}
	}
	local := time.Now()
	if tm, err := c.Time(ctx).Result(); err == nil {
		fmt.Fprintf(&b, "\n  server TIME %s, this process's wall clock %s", tm.UTC().Format(time.RFC3339Nano), local.UTC().Format(time.RFC3339Nano))
	}
	for _, section := range []string{"stats", "commandstats"} {
		info, _ := c.Info(ctx, section).Result()
		for _, line := range strings.Split(info, "\r\n") {
			for _, want := range []string{"expired_keys:", "evicted_keys:", "cmdstat_flushall:", "cmdstat_flushdb:", "cmdstat_del:", "cmdstat_unlink:"} {
				if strings.HasPrefix(line, want) {
					b.WriteString("\n  " + line)
				}
			}
		}
	}
	return b.String()
}

func slotsRun(t *testing.T, newStore func(t *testing.T, clock *storetest.Clock) slotsStore, seed uint64) {
	t.Helper()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	store := newStore(t, clock)
	rng := rand.New(rand.NewPCG(seed, 99))
	lease := slotsLease
	slots := bucket.Slots(3, lease)
	tokens := bucket.Limit{Capacity: 5, Rate: 1, Per: slotsUnit}
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
	// trace is what the steps did, each line with the test's clock and the
	// time passed since the run began, by the monotonic clock and by the
	// wall clock (Redis counts a key's TTL on the wall clock).
	var trace []string
	began := time.Now()
	note := func(format string, args ...any) {
		now := time.Now()
		trace = append(trace, fmt.Sprintf("  +%v (wall +%v) clock +%v: ", now.Sub(began).Round(time.Microsecond),
			now.Round(0).Sub(began.Round(0)).Round(time.Microsecond), clock.Now().Sub(storetest.Start))+fmt.Sprintf(format, args...))
	}
	fail := func(where, format string, args ...any) {
		t.Helper()
		msg := where + ": " + fmt.Sprintf(format, args...)
		note("failed")
		msg += fmt.Sprintf("\nheld by the model (expiry after start): %d live of %d", live(), len(held))
		for id, exp := range held {
			msg += fmt.Sprintf("\n  %s +%v", id, exp.Sub(storetest.Start))
		}
		msg += "\nthe last steps:\n" + strings.Join(trace[max(0, len(trace)-24):], "\n")
		if store.inspect != nil {
			msg += "\nthe store holds:" + store.inspect(pfx+"c", pfx+"t")
		}
		t.Fatal(msg)
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
				fail(where, "%v", err)
			}
			note("step %d: take %s: before %+v, decision allowed %v %+v", step, id, before.Buckets, d.Allowed, d.Buckets)
			wantOK := live() < slots.Capacity && before.Buckets[1].Remaining >= 1
			if d.Allowed != wantOK {
				fail(where, "allowed %v, the model says %v (live %d, tokens %d)", d.Allowed, wantOK, live(), before.Buckets[1].Remaining)
			}
			if d.Allowed {
				admits++
				held[id] = clock.Now().Add(lease)
			} else {
				denials++
				after := read()
				note("step %d: after the denial %+v", step, after.Buckets)
				if after.Buckets[0] != before.Buckets[0] || after.Buckets[1].Remaining != before.Buckets[1].Remaining {
					fail(where, "a denial changed state: %+v → %+v", before.Buckets, after.Buckets)
				}
			}
		case op < 8 && len(held) > 0:
			var id string
			for k := range held {
				id = k
				break
			}
			var err error
			how := "reconcile -1"
			if rng.IntN(2) == 0 {
				err = store.Reconcile(ctx, id, []bucket.Delta{{Key: pfx + "c", Limit: slots, Units: -1}})
			} else {
				how = "void"
				err = store.Void(ctx, id, items(1)[:1])
			}
			if err != nil {
				fail(where, "%v", err)
			}
			note("step %d: %s %s", step, how, id)
			delete(held, id)
		default:
			clock.Set(clock.Now().Add(time.Duration(rng.IntN(5)) * slotsUnit))
			note("step %d: clock moved", step)
		}
		if got := read().Buckets[0].Remaining; got != slots.Capacity-live() || got < 0 {
			fail(where, "%d slots free, the model says %d", got, slots.Capacity-live())
		}
	}
	if denials == 0 || admits == 0 {
		t.Fatalf("seed %d: %d admits, %d denials: the sequence tests nothing", seed, admits, denials)
	}
}
