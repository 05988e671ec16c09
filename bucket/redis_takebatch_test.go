package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// takeBatchStep is one request of the batch timelines: its request id
// (empty: none) and items, their keys' hash tag "PFX" (replaced by each
// run's own, so that runs share no key, take markers included).
type takeBatchStep struct {
	name  string
	id    string
	items []bucket.Item
}

// setID is a request id of bucket.NewRequestID's form made at now, its
// random part n: its take markers are members of its epoch's sets.
func setID(now time.Time, n uint64) string { return fmt.Sprintf("%s%016x", setPrefix(now), n) }

// setPrefix is the first 8 hex digits of setID's ids: now's second.
func setPrefix(now time.Time) string { return fmt.Sprintf("%08x", uint32(now.Unix())) }

// takeBatchSteps is a timeline over buckets that many requests share (a
// tenant's small USD bucket, a global requests bucket, a monthly quota),
// with denials in the middle (short, too large), a request without an id,
// a voided id and an id taken twice. allowed is the verdict each must get,
// so that the timeline cannot pass with batching and sequence broken alike.
func takeBatchSteps(now time.Time) (steps []takeBatchStep, allowed []bool) {
	usd := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Hour}
	rps := bucket.Limit{Capacity: 1000, Rate: 7, Per: time.Second}
	tpm := bucket.Limit{Capacity: 500, Rate: 3, Per: time.Minute}
	month := bucket.Quota(6, now.AddDate(0, 0, -9), now.AddDate(0, 0, 21))
	next := bucket.Quota(6, now.AddDate(0, 0, 21), now.AddDate(0, 0, 52))
	req := func(name, id, user string, usdCost, tokens int64, quota bool) takeBatchStep {
		items := []bucket.Item{
			{Key: "k:{PFX}:user:" + user, Limit: tpm, Cost: tokens},
			{Key: "k:{PFX}:usd", Limit: usd, Cost: usdCost},
		}
		if quota {
			items = append(items, bucket.Item{Key: "k:{PFX}:month", Limit: month, Cost: 2})
		}
		items = append(items, bucket.Item{Key: "k:{PFX}:rps", Limit: rps, Cost: 1})
		return takeBatchStep{name: name, id: id, items: items}
	}
	steps = []takeBatchStep{
		req("first", "r1", "alice", 4, 100, true),
		req("second (marker sets)", setID(now, 2), "bob", 4, 100, true),
		req("short usd: spends nothing (marker sets)", setID(now, 3), "alice", 5, 100, true),
		req("fits what r3 left", "r4", "carol", 2, 100, false),
		req("too large", "r5", "alice", 11, 1, false),
		req("no request id", "", "bob", 0, 200, true),
		req("quota used up (marker sets)", setID(now, 7), "carol", 0, 1, true),
		req("voided before", "void-me", "alice", 0, 1, false),
		req("voided before (marker sets)", setID(now, 8), "alice", 0, 1, false),
		req("user short", "r9", "bob", 0, 300, false),
		req("id taken again", "r1", "alice", 0, 10, false),
		req("last", "r11", "dave", 0, 499, false),
		// A caller already in the next window, then one lagging in this
		// window: its write keeps the key's TTL, the one the first set.
		{name: "next window", id: "r12", items: []bucket.Item{{Key: "k:{PFX}:laggy", Limit: next, Cost: 1}}},
		{name: "lagging window", id: "r13", items: []bucket.Item{{Key: "k:{PFX}:laggy", Limit: month, Cost: 1}}},
		// A limit that differs from tpm in its capacity alone: a batch
		// sends each distinct limit once, and must keep these two apart.
		{name: "capacity alone differs", id: "r14", items: []bucket.Item{
			{Key: "k:{PFX}:user:erin", Limit: bucket.Limit{Capacity: 200, Rate: 3, Per: time.Minute}, Cost: 300},
			{Key: "k:{PFX}:user:frank", Limit: tpm, Cost: 300},
		}},
		// A stored bucket that has refilled to capacity by now, taken at
		// cost 0 (token buckets only: takebatch.lua's fast path): full and
		// found, so its key is deleted (TestTakeBatchMatchesSequence stores
		// it first; without, nothing is written).
		{name: "full again: deleted", id: "r15", items: []bucket.Item{{Key: refilledKey, Limit: refilled, Cost: 0}}},
	}
	allowed = []bool{true, true, false, true, false, true, false, false, false, false, true, true, true, true, false, true}
	return steps, allowed
}

// refilledKey is the bucket of takeBatchSteps' "full again" step, under
// limit refilled: 10 units, 10 a second.
const refilledKey = "k:{PFX}:refilled"

var refilled = bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}

// named returns items with "PFX" in their keys replaced by prefix.
func named(items []bucket.Item, prefix string) []bucket.Item {
	out := make([]bucket.Item, len(items))
	for i, it := range items {
		it.Key = strings.ReplaceAll(it.Key, "PFX", prefix)
		out[i] = it
	}
	return out
}

// takeResult is one take's outcome, for comparison.
type takeResult struct {
	d      bucket.Decision
	voided bool
	err    string
}

func resultOf(d bucket.Decision, err error) takeResult {
	switch {
	case errors.Is(err, bucket.ErrVoided):
		return takeResult{voided: true}
	case err != nil:
		return takeResult{err: err.Error()}
	}
	return takeResult{d: d}
}

// runQueued sends steps through r as queued takes of slot, in order (each
// waits in the queue before the next is started), then releases them: one
// script call. It returns each step's result.
func runQueued(t *testing.T, r *bucket.Redis, slot uint16, steps []takeBatchStep, prefix string) []takeResult {
	t.Helper()
	// The previous call's batcher marks the slot idle after it answered
	// that call's takes: a hold set before then would be cleared by it,
	// and this call's first take sent alone, never queued (CI, two CPU
	// hogs: "0 takes queued, want 1" after 10 s).
	for deadline := time.Now().Add(10 * time.Second); !r.TakesIdle(slot); {
		if time.Now().After(deadline) {
			t.Fatal("the slot's previous call is still in flight after 10 s")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	r.HoldTakes(slot)
	results := make([]takeResult, len(steps))
	done := make(chan int, len(steps))
	for i, s := range steps {
		go func() {
			results[i] = resultOf(r.Take(context.Background(), s.id, named(s.items, prefix)))
			done <- i
		}()
		waitQueued(t, r, slot, i+1)
	}
	r.ReleaseTakes(slot)
	for range steps {
		<-done
	}
	return results
}

// waitQueued waits until n takes of slot are queued (bounded: 10 s).
func waitQueued(t *testing.T, r *bucket.Redis, slot uint16, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.QueuedTakes(slot) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d takes queued, want %d", r.QueuedTakes(slot), n)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestTakeBatchMatchesSequence: a batch of takes (one script call, on
// miniredis and on a real redis-server) gives each request the result it
// gets when the same takes run one by one in the same order, and leaves the
// same stored state: values bit for bit, TTLs exactly on miniredis (whose
// clock stands still) and, on redis-server, apart by no more than the time
// between the two runs.
func TestTakeBatchMatchesSequence(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, backend := range []string{"miniredis", "redis-server"} {
		t.Run(backend, func(t *testing.T) {
			var c *redis.Client
			if backend == "miniredis" {
				mr := miniredis.RunT(t)
				mr.SetTime(now)
				c = redis.NewClient(&redis.Options{Addr: mr.Addr()})
				t.Cleanup(func() { c.Close() })
			} else {
				c = redistest.Shared(t).Client()
			}
			ctx := context.Background()
			seq := newRedis(t, bucket.RedisOptions{Client: c, Now: clock, TakeBatch: 1})
			bat := newRedis(t, bucket.RedisOptions{Client: c, Now: clock})
			steps, allowed := takeBatchSteps(now)
			// start is before the first write of either prefix (the voids and
			// refilledKey below set TTLs too): two keys' TTLs differ by at
			// most the time since.
			start := time.Now()
			// refilledKey empty an hour ago (a token bucket's stored value:
			// level and updated, µs): full by now.
			for _, p := range []string{"seq", "bat"} {
				v := fmt.Sprintf("0 %d", now.Add(-time.Hour).UnixMicro())
				if err := c.Set(ctx, strings.ReplaceAll(refilledKey, "PFX", p), v, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range steps {
				if s.id == "void-me" || s.id == setID(now, 8) {
					for _, p := range []string{"seq", "bat"} {
						if err := seq.Void(ctx, s.id, named(s.items, p)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			// miniredis has no commandstats: the call counts are the real
			// server's.
			calls := func() int {
				if backend == "miniredis" {
					return 0
				}
				n, _ := scriptCalls(t, c)
				return n
			}
			evalsha0 := calls()
			var want []takeResult
			for _, s := range steps {
				want = append(want, resultOf(seq.Take(ctx, s.id, named(s.items, "seq"))))
			}
			evalsha1 := calls()
			got := runQueued(t, bat, 0, steps, "bat")
			evalsha2 := calls()
			if backend != "miniredis" && (evalsha1-evalsha0 != len(steps) || evalsha2-evalsha1 != 1) {
				t.Errorf("script calls (FCALL or EVALSHA): %d one by one, %d batched; want %d and 1", evalsha1-evalsha0, evalsha2-evalsha1, len(steps))
			}
			for i, s := range steps {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("step %d (%s): batched %+v, one by one %+v", i, s.name, got[i], want[i])
				}
				if want[i].d.Allowed != allowed[i] {
					t.Errorf("step %d (%s): allowed %v, want %v (%+v)", i, s.name, want[i].d.Allowed, allowed[i], want[i])
				}
			}
			keys := map[string]bool{}
			for _, s := range steps {
				for _, it := range s.items {
					keys[it.Key] = true
				}
				if s.id != "" && !strings.HasPrefix(s.id, setPrefix(now)) {
					keys["llmguard:{PFX}::tk:"+s.id] = true
				}
			}
			// The ids of setID's form: a take committed one by one (take.lua)
			// sets the id's marker key to "t", one committed in a batch adds
			// the id to its epoch's taken set (epoch: second / 10), with the
			// same TTL; a void leaves "v" in the marker key either way.
			taken := "llmguard:{bat}::tkt:" + strconv.FormatInt(now.Unix()/10, 10)
			var inSet []string
			for _, s := range steps {
				if !strings.HasPrefix(s.id, setPrefix(now)) {
					continue
				}
				sm, bm := c.Get(ctx, "llmguard:{seq}::tk:"+s.id).Val(), c.Get(ctx, "llmguard:{bat}::tk:"+s.id).Val()
				member := c.SIsMember(ctx, taken, s.id).Val()
				if sm == "t" && (bm != "" || !member) || sm != "t" && (bm != sm || member) {
					t.Errorf("%s: marker %q one by one; batched %q, in the taken set %v", s.id, sm, bm, member)
				}
				if member {
					inSet = append(inSet, s.id)
				}
			}
			if st, bt := c.PTTL(ctx, "llmguard:{seq}::tk:"+setID(now, 2)).Val(), c.PTTL(ctx, taken).Val(); len(inSet) == 0 || bt <= 0 || backend == "miniredis" && st != bt {
				t.Errorf("the taken set holds %v and expires in %v; a marker key one by one in %v", inSet, bt, st)
			}
			if n := c.Exists(ctx, strings.ReplaceAll(refilledKey, "PFX", "seq"), strings.ReplaceAll(refilledKey, "PFX", "bat")).Val(); n != 0 {
				t.Errorf("%s: %d of its two keys (one by one, batched) still stored; a bucket full again is deleted", refilledKey, n)
			}
			spread := time.Since(start)
			for k := range keys {
				sk, bk := strings.ReplaceAll(k, "PFX", "seq"), strings.ReplaceAll(k, "PFX", "bat")
				sv, se := c.Get(ctx, sk).Result()
				bv, be := c.Get(ctx, bk).Result()
				st, _ := c.PTTL(ctx, sk).Result()
				bt, _ := c.PTTL(ctx, bk).Result()
				if sv != bv || (se == nil) != (be == nil) {
					t.Errorf("%s: batched %q (%v), one by one %q (%v)", k, bv, be, sv, se)
				}
				diff := bt - st
				if diff < 0 {
					diff = -diff
				}
				if (st > 0) != (bt > 0) || (backend == "miniredis" && diff != 0) || diff > spread+time.Millisecond {
					t.Errorf("%s: TTL batched %v, one by one %v (runs %v apart)", k, bt, st, spread)
				}
			}
		})
	}
}

// TestTakeBatchContractServer runs the store contract with every take in
// takebatch.lua (a lone take as a batch of one).
func TestTakeBatchContractServer(t *testing.T) {
	c := redistest.Shared(t).Client()
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		r := newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
		r.SendTakesAsBatches()
		return r
	})
}

// TestTakeBatchQueuedCancel: a queued take whose context ends returns the
// context's error and is never sent; the takes queued with it go on.
func TestTakeBatchQueuedCancel(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	r := newRedis(t, bucket.RedisOptions{Client: c})
	l := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	shared := bucket.Item{Key: "shared", Limit: l, Cost: 3}
	r.HoldTakes(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := r.Take(ctx, "a", []bucket.Item{{Key: "only-a", Limit: l, Cost: 1}, shared})
		cancelled <- err
	}()
	waitQueued(t, r, 0, 1)
	kept := make(chan takeResult, 1)
	go func() { kept <- resultOf(r.Take(context.Background(), "b", []bucket.Item{shared})) }()
	waitQueued(t, r, 0, 2)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled take: %v, want context.Canceled", err)
	}
	waitQueued(t, r, 0, 1)
	r.ReleaseTakes(0)
	got := <-kept
	if !got.d.Allowed || got.d.Buckets[0].Remaining != 7 {
		t.Errorf("take b: %+v, want allowed with 7 left (a never sent)", got)
	}
	if mr.Exists("only-a") || mr.Exists("llmguard:{only-a}::tk:a") {
		t.Errorf("the cancelled take wrote: keys %v", mr.Keys())
	}
}

// TestTakeBatchFailure: when a batch's script fails every take it carried
// gets the error, none of them applied, and the slot serves the next
// takes.
func TestTakeBatchFailure(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	r := newRedis(t, bucket.RedisOptions{Client: c})
	l := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	r.HoldTakes(0)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := r.Take(context.Background(), fmt.Sprint("id", i), []bucket.Item{{Key: "k", Limit: l, Cost: 1}})
			errs <- err
		}()
		waitQueued(t, r, 0, i+1)
	}
	mr.SetError("LOADING injected")
	r.ReleaseTakes(0)
	for range 3 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "LOADING injected") {
			t.Errorf("take in a failed batch: %v, want the script's error", err)
		}
	}
	mr.SetError("")
	d, err := r.Take(context.Background(), "after", []bucket.Item{{Key: "k", Limit: l, Cost: 1}})
	if err != nil || !d.Allowed || d.Buckets[0].Remaining != 9 {
		t.Errorf("take after the failed batch: %+v, %v; want allowed, 9 left (the batch applied nothing)", d, err)
	}
}

// TestTakeBatchClusterSlots: on a 3-master Redis Cluster, takes over two
// tenants' slots and a global bucket are batched per slot: the global
// slot's queued takes go in one script call, applied in their order (each
// sees the one before it), and every bucket ends as the takes one by one
// would leave it. The tenants are picked on masters other than the
// global's, so that the global master's script calls are its slot's alone
// (a request's groups are sent at once, so how the tenants' own takes
// coalesce depends on timing and is not counted).
func TestTakeBatchClusterSlots(t *testing.T) {
	cl := redistest.SharedCluster(t, 3)
	c := cl.Client()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	r := newRedis(t, bucket.RedisOptions{Client: c, Now: func() time.Time { return now }})
	l := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	global := "llmguard:{global}:rps"
	gslot := bucket.SlotOf(global)
	ctx := context.Background()
	masterOf := func(key string) string {
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	gmaster := masterOf(global)
	var tenants []string
	for i := 0; len(tenants) < 2 && i < 1000; i++ {
		name := fmt.Sprint("tenant", i)
		key := "llmguard:{" + name + "}:usd"
		if masterOf(key) != gmaster && (len(tenants) == 0 || bucket.SlotOf(key) != bucket.SlotOf("llmguard:{"+tenants[0]+"}:usd")) {
			tenants = append(tenants, name)
		}
	}
	if len(tenants) < 2 {
		t.Fatalf("no two tenants off the global slot's master %s", gmaster)
	}
	const n = 8
	var steps []takeBatchStep
	for i := range n {
		tenant := tenants[i%2]
		steps = append(steps, takeBatchStep{name: fmt.Sprint(i), id: fmt.Sprint("c", i), items: []bucket.Item{
			{Key: "llmguard:{" + tenant + "}:usd", Limit: l, Cost: 10},
			{Key: global, Limit: l, Cost: 1},
		}})
	}
	globalCalls := func() int {
		admin := redis.NewClient(&redis.Options{Addr: gmaster})
		defer admin.Close()
		n, _ := scriptCalls(t, admin)
		return n
	}
	before := globalCalls()
	got := runQueued(t, r, gslot, steps, "")
	if calls := globalCalls() - before; calls != 1 {
		t.Errorf("%d script calls on the global slot's master for %d requests, want 1 (the global slot's takes in one)", calls, n)
	}
	for i, g := range got {
		if !g.d.Allowed || g.d.Buckets[1].Remaining != int64(1000-1-i) {
			t.Errorf("request %d: %+v, want allowed with %d left in the global bucket", i, g, 1000-1-i)
		}
	}
	for _, tenant := range tenants {
		k := "llmguard:{" + tenant + "}:usd"
		d, err := r.Take(context.Background(), "", []bucket.Item{{Key: k, Limit: l}})
		if err != nil || d.Buckets[0].Remaining != 1000-10*n/2 {
			t.Errorf("%s: %+v, %v; want %d left", k, d, err, 1000-10*n/2)
		}
	}
}
