package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// errMoody is the failure of a moodyStore call: a timeout or a broken
// connection (bucket.MayHaveApplied), whether or not the call was applied.
var errMoody = errors.New("moody store: i/o timeout")

// Modes of a moodyStore.
const (
	moodUp      = iota // every call passes
	moodUnsent         // every call fails unsent (bucket.ErrNotSent: a breaker's rejection)
	moodLost           // every call fails before the store applies it, as a timeout does
	moodApplied        // every call is applied, then fails (the reply lost)
	moodModes
)

// moodyStore fails the calls to a Store as mode says. Not safe for
// concurrent use (the fuzz target is sequential).
type moodyStore struct {
	bucket.Store
	mode int
}

func (f *moodyStore) fail(apply func() error) error {
	switch f.mode {
	case moodUnsent:
		return fmt.Errorf("moody: %w", bucket.ErrNotSent)
	case moodLost:
		return errMoody
	case moodApplied:
		if err := apply(); err != nil {
			return err
		}
		return errMoody
	}
	return apply()
}

func (f *moodyStore) Take(ctx context.Context, id string, items []bucket.Item) (d bucket.Decision, err error) {
	err = f.fail(func() (e error) { d, e = f.Store.Take(ctx, id, items); return e })
	if err != nil {
		d = bucket.Decision{}
	}
	return d, err
}

func (f *moodyStore) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	return f.fail(func() error { return f.Store.Reconcile(ctx, id, deltas) })
}

func (f *moodyStore) Void(ctx context.Context, id string, items []bucket.Item) error {
	return f.fail(func() error { return f.Store.Void(ctx, id, items) })
}

// voider voids a Take that failed and may have been applied, as the
// AsyncReconciler under a Leased store in production does, holding each
// Void that fails until retry sends it again.
type voider struct {
	bucket.Store
	pending []pendingVoid
}

type pendingVoid struct {
	id    string
	items []bucket.Item
}

func (v *voider) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	d, err := v.Store.Take(ctx, id, items)
	if id != "" && bucket.MayHaveApplied(err) {
		v.pending = append(v.pending, pendingVoid{id, append([]bucket.Item(nil), items...)})
		v.retry()
	}
	return d, err
}

// retry sends the held Voids again, keeping those that fail.
func (v *voider) retry() {
	kept := v.pending[:0]
	for _, p := range v.pending {
		if err := v.Store.Void(context.Background(), p.id, p.items); err != nil {
			kept = append(kept, p)
		}
	}
	v.pending = kept
}

// fuzzTake is a request the fuzz target's callers were admitted, still
// open: its node, what it took and under which id.
type fuzzTake struct {
	node   int
	id     string
	taken  []bucket.Item
	cost   int64
	leased bool
}

// fuzzSettle is a reconciliation or Void the fuzz target sent that
// failed, to be sent again, as the meter's asynchronous reconciler does.
type fuzzSettle struct {
	node   int
	id     string
	deltas []bucket.Delta // a reconciliation
	items  []bucket.Item  // a Void, when deltas is nil
}

// FuzzShardedLeasedBound drives a sharded, leased token bucket (1,000
// units, 100 a second, in 4 shards, each leased 40 units at a time for
// 100 ms) through two nodes (two Leased stores over one memory store) with
// a sequence of operations the input spells: takes of random costs on
// either node, refunds of part of an open request, the same refund sent
// twice, Voids of open requests (sent twice too), the clock moved, the
// store failing in each way a store fails (unsent, lost before it is
// applied, applied with its reply lost) and healing, lease sweeps and a
// node returning all its leases. Every failed Take that may have been
// applied is voided, and every failed reconciliation or Void is sent again
// until it passes (idempotent per id). The units admitted, less those
// given back (counted once, when first sent), never exceed the burst plus
// the refill since the start: no sequence of takes, reconciliations,
// Voids and failures over-admits; and no request is refunded more than
// it took (a refund or Void that applied twice would show as units
// admitted past the bound). STYLE.md habit 8.
func FuzzShardedLeasedBound(f *testing.F) {
	f.Add([]byte{0, 200, 0, 200, 0, 200, 0, 200, 0, 200, 0, 200, 0, 120, 1, 3, 2, 0, 3, 1, 4, 5, 0, 250})
	f.Add([]byte{5, moodApplied, 0, 40, 0, 40, 5, moodUp, 0, 255, 0, 255, 0, 255, 0, 255, 3, 0, 3, 0, 0, 255})
	f.Add([]byte{5, moodLost, 0, 90, 1, 90, 5, moodUp, 6, 0, 0, 255, 0, 255, 7, 0, 0, 255, 4, 100, 0, 255})
	f.Add([]byte{0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 1, 0, 2, 0, 1, 1, 2, 1, 5, moodApplied, 1, 2, 2, 2, 3, 0, 5, moodUp, 0, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		clock := storetest.NewClock(storetest.Start)
		shardedLeasedRun(t, ops, newFuzzMemory(t, clock), clock, "fz")
	})
}

// newFuzzMemory is a memory store on clock, closed when t ends.
func newFuzzMemory(t *testing.T, clock *storetest.Clock) bucket.Store {
	m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { m.Close() })
	return m
}

// TestShardedLeasedBound runs FuzzShardedLeasedBound's sequence on 20,000
// operations drawn from a fixed seed, weighted towards takes so that the
// limit binds, and checks that the run exercised it: admissions, denials,
// failed takes, refunds and Voids.
func TestShardedLeasedBound(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	st := shardedLeasedRun(t, shardedOps(20_000), newFuzzMemory(t, clock), clock, "fz")
	t.Logf("%+v", st)
	if st.admitted < 1000 || st.denied < 1000 || st.failed < 500 || st.refunds < 200 || st.voids < 200 {
		t.Fatalf("%+v: the run does not exercise the limit", st)
	}
}

// TestShardedLeasedBoundRedis runs 3,000 of those operations on a real
// redis-server (the scripts' Void markers and reconcile ids, on the
// test's clock), under a key prefix of its own.
func TestShardedLeasedBoundRedis(t *testing.T) {
	c := redistest.Shared(t).Client()
	clock := storetest.NewClock(storetest.Start)
	s := newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	st := shardedLeasedRun(t, shardedOps(3_000), s, clock, fmt.Sprintf("fz%d", time.Now().UnixNano()))
	t.Logf("%+v", st)
	if st.admitted < 150 || st.denied < 150 || st.failed < 50 || st.refunds < 20 || st.voids < 20 {
		t.Fatalf("%+v: the run does not exercise the limit", st)
	}
}

// shardedOps is n operations of shardedLeasedRun drawn from a fixed seed,
// weighted towards takes so that the limit binds.
func shardedOps(n int) []byte {
	r := rand.New(rand.NewPCG(51, 7))
	ops := make([]byte, 0, 2*n)
	for range n {
		op := byte(r.IntN(8))
		if r.IntN(3) > 0 { // two in three: a take
			op = byte(r.IntN(2))
		}
		arg := byte(r.IntN(256))
		switch {
		case op == 5 && r.IntN(3) > 0:
			arg = moodUp // the store heals two times in three it changes
		case op < 2 && r.IntN(8) > 0:
			arg %= 40 // most takes cost up to 78 units
		}
		ops = append(ops, op, arg)
	}
	return ops
}

// shardedStats counts what a shardedLeasedRun did.
type shardedStats struct {
	admitted, denied, failed, refunds, voids int
	net, bound                               int64 // units admitted net at the end, and the bound then
}

// shardedLeasedRun is the body of FuzzShardedLeasedBound over ops (pairs
// of an operation and its argument), on mem, a store on clock (which
// starts at storetest.Start), its keys under prefix.
func shardedLeasedRun(t *testing.T, ops []byte, mem bucket.Store, clock *storetest.Clock, prefix string) (st shardedStats) {
	t.Helper()
	{
		ctx := context.Background()
		start := storetest.Start
		moody := &moodyStore{Store: mem}
		v := &voider{Store: moody}
		var nodes [2]*bucket.Leased
		for i := range nodes {
			nodes[i] = bucket.NewLeased(v, bucket.LeaseOptions{Now: clock.Now, SweepEvery: -1})
		}
		limit := bucket.Limit{Capacity: 1000, Rate: 100, Per: time.Second}
		const k = 4
		keys := bucket.ShardKeys{Prefix: prefix + ":{g:", Suffix: "}:l"}
		item := bucket.Item{Key: prefix + ":{g}:l", Limit: limit, Lease: bucket.Lease{Size: 40, TTL: 100 * time.Millisecond, Label: "fz"}}
		var (
			net     int64 // units admitted, less those given back
			open    []fuzzTake
			pending []fuzzSettle
			seq     int
		)
		send := func(s fuzzSettle) {
			var err error
			if s.deltas != nil {
				err = nodes[s.node].Reconcile(ctx, s.id, s.deltas)
			} else {
				err = nodes[s.node].Void(ctx, s.id, s.items)
			}
			if err != nil {
				if errors.Is(err, bucket.ErrInvalid) {
					t.Fatalf("settle %+v: %v", s, err)
				}
				pending = append(pending, s)
			}
		}
		heal := func() {
			moody.mode = moodUp
			v.retry()
			again := pending
			pending = nil
			for _, s := range again {
				send(s)
			}
		}
		check := func(step int) {
			bound := limit.Capacity + int64(clock.Now().Sub(start)/time.Millisecond)*limit.Rate/1000
			if net > bound {
				t.Fatalf("step %d at +%v: %d units admitted net, over the bound %d", step, clock.Now().Sub(start), net, bound)
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			switch op {
			case 0, 1: // a take on node op
				seq++
				id := fmt.Sprintf("r%d", seq)
				it := item
				it.Cost = int64(arg) * 2 // 0..510: some need several shards
				leased := arg%2 == 0     // else the store's own take, through the node
				if !leased {
					it.Lease = bucket.Lease{}
				}
				d, err := bucket.TakeSharded(ctx, nodes[op], id, []bucket.ShardedItem{{Item: it, Shards: k, Keys: keys}},
					func(n int) int { return int(arg) % n })
				if errors.Is(err, bucket.ErrInvalid) {
					t.Fatalf("step %d: %v", i/2, err)
				}
				switch {
				case err != nil:
					st.failed++
				case !d.Allowed:
					st.denied++
				}
				if err == nil && d.Allowed {
					st.admitted++
					net += it.Cost
					open = append(open, fuzzTake{node: int(op), id: d.ID, taken: d.Taken[0], cost: it.Cost, leased: leased})
				}
			case 2, 3: // a refund of part of an open request; op 3 sends it twice
				if len(open) == 0 {
					continue
				}
				j := int(arg) % len(open)
				o := open[j]
				refund := o.cost * int64(arg%5) / 4 // 0..cost, and a 5th case of the whole cost
				refund = min(refund, o.cost)
				open = append(open[:j], open[j+1:]...)
				if refund == 0 {
					continue
				}
				s := fuzzSettle{node: o.node, id: o.id + "-rc", deltas: bucket.SplitDelta(nil, o.taken, -refund)}
				net -= refund
				st.refunds++
				send(s)
				if op == 3 {
					send(s) // a retry: applied once
				}
			case 4: // the clock moves on, up to 2.55 s
				clock.Set(clock.Now().Add(time.Duration(arg) * 10 * time.Millisecond))
			case 5: // the store changes its ways
				moody.mode = int(arg) % moodModes
				if moody.mode == moodUp {
					heal()
				}
			case 6: // a Void of an open request, sent twice
				if len(open) == 0 {
					continue
				}
				j := int(arg) % len(open)
				o := open[j]
				open = append(open[:j], open[j+1:]...)
				if !o.leased {
					// A leased take that succeeded is not undone (Leased.Void:
					// what a lease paid stays spent), so it gives nothing back.
					net -= o.cost
				}
				st.voids++
				s := fuzzSettle{node: o.node, id: o.id, items: o.taken}
				send(s)
				send(s)
			case 7: // expired leases go back; arg odd: a node gives back all it holds
				if arg%2 == 1 {
					_ = nodes[arg/2%2].ReturnAll()
				} else {
					for _, n := range nodes {
						_ = n.Sweep(clock.Now())
					}
				}
			}
			check(i / 2)
		}
		heal()
		for _, n := range nodes {
			if err := n.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
		}
		check(len(ops) / 2)
		st.net, st.bound = net, limit.Capacity+int64(clock.Now().Sub(start)/time.Millisecond)*limit.Rate/1000
		// What the shards hold now, at the same instant, is at most the
		// burst: no unit given back twice beyond it either.
		var held int64
		for i := range k {
			d, err := mem.Take(ctx, "", []bucket.Item{{Key: keys.Key(i), Limit: bucket.ShardLimit(limit, k, i)}})
			if err != nil {
				t.Fatal(err)
			}
			held += d.Buckets[0].Remaining
		}
		if held > limit.Capacity {
			t.Fatalf("the shards hold %d, above the capacity %d", held, limit.Capacity)
		}
	}
	return st
}
