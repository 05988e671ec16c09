package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

// counted is a Store that counts the takes that reach it and the
// admissions it makes.
type counted struct {
	bucket.Store
	takes, allowed atomic.Int64
}

func (c *counted) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	c.takes.Add(1)
	d, err := c.Store.Take(ctx, id, items)
	if err == nil && d.Allowed {
		c.allowed.Add(1)
	}
	return d, err
}

// denyCached is a DenyCache of window over a counted memory store, both on
// a clock the test moves, and the keys of the denials it answered.
func denyCached(t *testing.T, window time.Duration) (*bucket.DenyCache, *counted, *bucket.Memory, *storetest.Clock, *[]string) {
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	inner := &counted{Store: mem}
	var hits []string
	c := bucket.NewDenyCache(inner, bucket.DenyCacheOptions{Window: window, Now: clock.Now, OnCached: func(it bucket.Item) { hits = append(hits, it.Key) }})
	t.Cleanup(func() { c.Close(); mem.Close() })
	return c, inner, mem, clock, &hits
}

// A denial with a wait is answered from memory for min(wait, window) to
// takes of the same key that cost at least as much, with the rest of the
// wait as RetryAfter, spending nothing; a cheaper take, another limit, a
// too-large take, and any take after the window go to the store.
func TestDenyCacheTimeline(t *testing.T) {
	ctx := context.Background()
	c, inner, mem, clock, hits := denyCached(t, 100*time.Millisecond)
	l := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	take := func(step string, cost int64, lim bucket.Limit) bucket.Decision {
		t.Helper()
		d, err := c.Take(ctx, "", []bucket.Item{{Key: "k", Limit: lim, Cost: cost}})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return d
	}
	at := func(d time.Duration) { clock.Set(storetest.Start.Add(d)) }
	level := func() int64 {
		d, _ := mem.Take(ctx, "", []bucket.Item{{Key: "k", Limit: l}})
		return d.Buckets[0].Remaining
	}

	if d := take("drain", 10, l); !d.Allowed {
		t.Fatalf("drain: %+v", d)
	}
	d := take("deny 5", 5, l) // level 0: 5 s to hold 5
	if d.Allowed || d.Cached || d.RetryAfter != 5*time.Second || inner.takes.Load() != 2 {
		t.Fatalf("deny 5: %+v after %d store takes, want the store's denial, 5s", d, inner.takes.Load())
	}
	for _, step := range []struct {
		name   string
		at     time.Duration
		cost   int64
		limit  bucket.Limit
		cached bool
		retry  time.Duration // when cached
	}{
		{name: "same cost, 40ms on: cached", at: 40 * time.Millisecond, cost: 5, limit: l, cached: true, retry: 5*time.Second - 40*time.Millisecond},
		{name: "dearer, 50ms on: cached", at: 50 * time.Millisecond, cost: 9, limit: l, cached: true, retry: 5*time.Second - 50*time.Millisecond},
		{name: "cheaper: the store", at: 50 * time.Millisecond, cost: 4, limit: l},
		{name: "another limit: the store", at: 55 * time.Millisecond, cost: 5, limit: bucket.Limit{Capacity: 10, Rate: 2, Per: time.Second}},
		{name: "too large: the store", at: 55 * time.Millisecond, cost: 11, limit: l},
		{name: "4 again under l: the store (the entry is the other limit's)", at: 60 * time.Millisecond, cost: 4, limit: l},
	} {
		at(step.at)
		before, lv := inner.takes.Load(), level()
		d := take(step.name, step.cost, step.limit)
		reached := inner.takes.Load() != before
		if d.Allowed || reached == step.cached || d.Cached != step.cached {
			t.Fatalf("%s: %+v, store reached %v; want cached %v", step.name, d, reached, step.cached)
		}
		if step.cached && (d.RetryAfter != step.retry || d.DeniedBy != 0 || d.Buckets[0].Remaining != 0) {
			t.Fatalf("%s: %+v, want retry %v", step.name, d, step.retry)
		}
		if step.cached && level() != lv {
			t.Fatalf("%s: a cached denial spent: %d then %d", step.name, lv, level())
		}
	}
	// Each denial by the store replaced the key's entry; the last, of 4
	// units at +60ms under l, answers until +160ms; then the store decides.
	at(159 * time.Millisecond)
	if d := take("cost 4 at +159ms", 4, l); !d.Cached {
		t.Fatalf("cost 4 at +159ms: %+v, want cached", d)
	}
	at(160 * time.Millisecond)
	before := inner.takes.Load()
	if d := take("cost 4 at +160ms", 4, l); d.Cached || inner.takes.Load() == before {
		t.Fatalf("cost 4 at +160ms: %+v, want the store's answer: the reuse expired", d)
	}
	if len(*hits) != 3 || (*hits)[0] != "k" {
		t.Fatalf("OnCached saw %v, want k three times", *hits)
	}
}

// A denial whose wait is shorter than the window is reused only for the
// wait; a refund or reconciliation through the cache never turns a cached
// denial into an admission: the store then decides, after the reuse.
func TestDenyCacheShortWaitAndRefund(t *testing.T) {
	ctx := context.Background()
	c, inner, _, clock, _ := denyCached(t, time.Second)
	l := bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Second} // 1 unit a millisecond
	items := []bucket.Item{{Key: "k", Limit: l, Cost: 1000}}
	if d, _ := c.Take(ctx, "a", items); !d.Allowed {
		t.Fatal(d)
	}
	items[0].Cost = 10
	if d, _ := c.Take(ctx, "b", items); d.Allowed || d.RetryAfter != 10*time.Millisecond {
		t.Fatalf("%+v, want a 10ms wait", d)
	}
	if err := c.Reconcile(ctx, "a", []bucket.Delta{{Key: "k", Limit: l, Units: -1000}}); err != nil { // all of it back
		t.Fatal(err)
	}
	clock.Set(storetest.Start.Add(9 * time.Millisecond))
	allowed := inner.allowed.Load()
	if d, _ := c.Take(ctx, "c", items); d.Allowed || !d.Cached || d.RetryAfter != time.Millisecond {
		t.Fatalf("after a full refund, within the wait: %+v, want still the cached denial", d)
	}
	if inner.allowed.Load() != allowed {
		t.Fatal("the store admitted behind a cached denial")
	}
	clock.Set(storetest.Start.Add(10 * time.Millisecond))
	if d, _ := c.Take(ctx, "d", items); !d.Allowed || d.Cached {
		t.Fatalf("once the wait passed: %+v, want the store's admission", d)
	}
}

// Over random takes, refunds and instants, the cache never admits: every
// admission is the store's own, and a cached denial reaches no store.
func TestDenyCacheNeverAdmits(t *testing.T) {
	ctx := context.Background()
	c, inner, _, clock, hits := denyCached(t, 50*time.Millisecond)
	r := rand.New(rand.NewPCG(5, 6))
	limits := []bucket.Limit{{Capacity: 20, Rate: 100, Per: time.Second}, {Capacity: 50, Rate: 10, Per: time.Second}}
	now := storetest.Start
	var admitted, cached int64
	for i := range 5000 {
		now = now.Add(time.Duration(r.IntN(5000)) * time.Microsecond)
		clock.Set(now)
		if r.IntN(6) == 0 {
			k := r.IntN(3)
			if err := c.Reconcile(ctx, fmt.Sprint("rc", i), []bucket.Delta{{Key: fmt.Sprint("k", k), Limit: limits[k%2], Units: -r.Int64N(10)}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		k := r.IntN(3)
		items := []bucket.Item{{Key: fmt.Sprint("k", k), Limit: limits[k%2], Cost: r.Int64N(12)}, {Key: "shared", Limit: limits[1], Cost: r.Int64N(3)}}
		before := inner.takes.Load()
		d, err := c.Take(ctx, fmt.Sprint("t", i), items)
		if err != nil {
			t.Fatal(err)
		}
		reached := inner.takes.Load() != before
		switch {
		case d.Allowed && (!reached || d.Cached):
			t.Fatalf("take %d: admitted without the store: %+v", i, d)
		case d.Cached && reached:
			t.Fatalf("take %d: a cached denial reached the store", i)
		case d.Cached && (d.RetryAfter <= 0 || items[d.DeniedBy].Cost == 0):
			t.Fatalf("take %d: cached %+v of %+v", i, d, items)
		}
		if d.Allowed {
			admitted++
		}
		if d.Cached {
			cached++
		}
	}
	if admitted != inner.allowed.Load() || admitted < 500 || cached < 200 || int64(len(*hits)) != cached {
		t.Fatalf("%d admitted (store: %d), %d cached (OnCached: %d): the run does not exercise the cache", admitted, inner.allowed.Load(), cached, len(*hits))
	}
}

// The cache holds at most MaxKeys denials, whatever the number of keys
// denied.
func TestDenyCacheBounded(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer mem.Close()
	inner := &counted{Store: mem}
	c := bucket.NewDenyCache(inner, bucket.DenyCacheOptions{Window: time.Hour, MaxKeys: 64, Now: clock.Now})
	defer c.Close()
	l := bucket.Limit{Capacity: 1, Rate: 1, Per: time.Hour}
	for i := range 5000 {
		items := []bucket.Item{{Key: fmt.Sprint("k", i), Limit: l, Cost: 1}}
		c.Take(ctx, "", items)
		if d, _ := c.Take(ctx, "", items); d.Allowed {
			t.Fatal("a second take of a bucket of one unit passed")
		}
	}
	if n := c.Len(); n > 64 || n == 0 {
		t.Fatalf("%d denials held after 5000 keys were denied, want some and at most 64", n)
	}
	// The newest is held, and answered from memory.
	before := inner.takes.Load()
	if d, _ := c.Take(ctx, "", []bucket.Item{{Key: "k4999", Limit: l, Cost: 1}}); !d.Cached || inner.takes.Load() != before {
		t.Fatalf("the last key denied: %+v, want its denial from memory", d)
	}
}

// A take with cached denials on several of its items is denied by the one
// whose rest of wait is the longest (the first of those that wait as
// long), with that wait, as the store names the denier: never another
// item's key with that wait.
func TestDenyCacheNamesTheLongestWait(t *testing.T) {
	ctx := context.Background()
	c, inner, _, clock, _ := denyCached(t, 10*time.Second)
	fast := bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second} // 100ms a unit
	slow := bucket.Limit{Capacity: 4, Rate: 1, Per: time.Second}   // 1s a unit
	take := func(step string, items ...bucket.Item) bucket.Decision {
		t.Helper()
		d, err := c.Take(ctx, "", items)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return d
	}
	if d := take("drain", bucket.Item{Key: "a", Limit: fast, Cost: 10}, bucket.Item{Key: "b", Limit: slow, Cost: 4},
		bucket.Item{Key: "c", Limit: fast, Cost: 10}); !d.Allowed {
		t.Fatalf("drain: %+v", d)
	}
	for _, s := range []struct {
		key  string
		lim  bucket.Limit
		cost int64
		wait time.Duration
	}{{"a", fast, 5, 500 * time.Millisecond}, {"b", slow, 3, 3 * time.Second}, {"c", fast, 5, 500 * time.Millisecond}} {
		if d := take("deny "+s.key, bucket.Item{Key: s.key, Limit: s.lim, Cost: s.cost}); d.Allowed || d.Cached || d.RetryAfter != s.wait {
			t.Fatalf("deny %s: %+v, want the store's denial of %v", s.key, d, s.wait)
		}
	}
	clock.Set(storetest.Start.Add(100 * time.Millisecond))
	before := inner.takes.Load()
	a, b, cc := bucket.Item{Key: "a", Limit: fast, Cost: 5}, bucket.Item{Key: "b", Limit: slow, Cost: 3}, bucket.Item{Key: "c", Limit: fast, Cost: 5}
	for _, step := range []struct {
		name  string
		items []bucket.Item
		by    int
		retry time.Duration
	}{
		{name: "a then b: b waits longer", items: []bucket.Item{a, b}, by: 1, retry: 2900 * time.Millisecond},
		{name: "b then a: b waits longer", items: []bucket.Item{b, a}, by: 0, retry: 2900 * time.Millisecond},
		{name: "c then a: as long, the first", items: []bucket.Item{cc, a}, by: 0, retry: 400 * time.Millisecond},
	} {
		d := take(step.name, step.items...)
		if d.Allowed || !d.Cached || d.DeniedBy != step.by || d.RetryAfter != step.retry {
			t.Errorf("%s: %+v, want cached, denied by %d with %v", step.name, d, step.by, step.retry)
		}
	}
	if inner.takes.Load() != before {
		t.Errorf("the store was reached %d times, want none", inner.takes.Load()-before)
	}
}
