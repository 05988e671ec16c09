package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// hungGroupClient runs scripts on a real server, but holds every call for
// keys of the tag "{a}" until its context ends and fails it then, as a
// master that accepted the connection and never answers: the call costs
// the request's whole deadline. It notes whether a call for "{b}" came
// while one of "{a}" was held. No FCall: the store runs scripts by
// EVALSHA.
type hungGroupClient struct {
	bucket.RedisScripter
	bSent     chan struct{} // closed at the first call of "{b}"
	once      sync.Once
	bDuringA  atomic.Bool // a "{b}" call came while an "{a}" call was held
	aHeld     atomic.Int32
	aReturned atomic.Int32
}

func (c *hungGroupClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if len(keys) > 0 && strings.Contains(keys[0], "{a}") {
		c.aHeld.Add(1)
		defer c.aReturned.Add(1)
		select {
		case <-c.bSent:
			c.bDuringA.Store(true)
		case <-ctx.Done():
		}
		<-ctx.Done()
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("injected: {a}'s master never answered: %w", ctx.Err()))
		return cmd
	}
	if len(keys) > 0 && strings.Contains(keys[0], "{b}") {
		c.once.Do(func() { close(c.bSent) })
	}
	return c.RedisScripter.EvalSha(ctx, sha, keys, args...)
}

// A take over two slot groups sends both at once: with the first group's
// master hung, the second group's call goes while the first is held, and
// the take, marked WithPartial, is decided by the second group within the
// request's deadline (a PartialError naming the first group's items, the
// second's bucket charged). Before (issue #14), the groups went one after
// the other: the hung call spent the whole deadline, the second group's
// then failed on the expired context, and the request failed whole.
func TestGroupsSentAtOnceHungMasterDoesNotFailTheOthers(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	now := time.Unix(1_700_000_000, 0)
	client := &hungGroupClient{RedisScripter: rc, bSent: make(chan struct{})}
	r := newRedis(t, bucket.RedisOptions{Client: client, Cluster: true, Now: func() time.Time { return now }})
	lim := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	items := []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 10}, {Key: "llmguard:{b}:y", Limit: lim, Cost: 10}}
	// The deadline is the test's only clock: the hung call ends with it.
	ctx, cancel := context.WithTimeout(bucket.WithPartial(context.Background()), 200*time.Millisecond)
	defer cancel()
	d, err := r.Take(ctx, bucket.NewRequestID(now), items)
	pe := bucket.AsPartial(err)
	if pe == nil || !slices.Equal(pe.Failed, []int{0}) || !d.Allowed || d.Buckets[1].Remaining != 90 {
		t.Fatalf("take: %+v, %v; want allowed by {b} (90 left) with item 0 failed", d, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the failed group's error %v does not wrap its deadline", err)
	}
	if !client.bDuringA.Load() {
		t.Error("{b}'s call was not sent while {a}'s was held: the groups went one after the other")
	}
	if client.aHeld.Load() != 1 || client.aReturned.Load() != 1 {
		t.Errorf("{a} calls held %d, returned %d; want 1 and 1: Take returned before its call did", client.aHeld.Load(), client.aReturned.Load())
	}
	// {b}'s bucket holds the take: read it at cost zero.
	got, err := r.Take(context.Background(), "", []bucket.Item{{Key: items[1].Key, Limit: lim}})
	if err != nil || got.Buckets[0].Remaining != 90 {
		t.Fatalf("{b} after the take: %+v, %v; want 90 left", got, err)
	}

	// Without the mark the same take fails whole, and {b}'s take is given
	// back (in the background, as the Void of its group).
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := r.Take(ctx2, bucket.NewRequestID(now), items); err == nil || bucket.AsPartial(err) != nil {
		t.Fatalf("unmarked take: %v, want a whole failure", err)
	}
	for i := 0; ; i++ {
		got, err := r.Take(context.Background(), "", []bucket.Item{{Key: items[1].Key, Limit: lim}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Buckets[0].Remaining == 90 {
			break
		}
		if i == 500 {
			t.Fatalf("{b} holds %d after the failed take, want 90: its group's take not given back", got.Buckets[0].Remaining)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A take over three slot groups, all sent at once, whose middle group
// denies: the groups that took ({a}, {c}) are given back, so the denial
// spends nothing, and the Decision reports every bucket as one take
// would (the denying bucket, its retry-after, each other bucket's level
// without the request's cost). With a request id, a later Void of the
// request refunds nothing more: the refunds were each group's Void.
func TestGroupsSentAtOnceDenialGivesBack(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	now := time.Unix(1_700_000_000, 0)
	r := newRedis(t, bucket.RedisOptions{Client: rc, Cluster: true, Now: func() time.Time { return now }})
	lim := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Second}
	small := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	items := []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 10}, {Key: "llmguard:{b}:y", Limit: small, Cost: 8}, {Key: "llmguard:{c}:z", Limit: lim, Cost: 10}}
	// Take 7 of {b}'s 10 first: the request's 8 would wait 5 s (8 − 3 at 1 a second).
	if d, err := r.Take(context.Background(), "", []bucket.Item{{Key: items[1].Key, Limit: small, Cost: 7}}); err != nil || !d.Allowed {
		t.Fatalf("first take of {b}: %+v, %v", d, err)
	}
	id := bucket.NewRequestID(now)
	d, err := r.Take(context.Background(), id, items)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{100, 3, 100}
	if d.Allowed || d.DeniedBy != 1 || d.TooLarge || d.RetryAfter != 5*time.Second {
		t.Fatalf("decision %+v; want denied by item 1 with a retry-after of 5s", d)
	}
	for i, st := range d.Buckets {
		if st.Remaining != want[i] {
			t.Errorf("item %d reports %d left, want %d", i, st.Remaining, want[i])
		}
	}
	if err := r.Void(context.Background(), id, items); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		got, err := r.Take(context.Background(), "", []bucket.Item{{Key: it.Key, Limit: it.Limit}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Buckets[0].Remaining != want[i] {
			t.Errorf("after the denial and the request's Void, item %d holds %d, want %d", i, got.Buckets[0].Remaining, want[i])
		}
	}
}

// TestGroupsSentAtOnceClusterMasterKilled kills the master of a request's
// first slot group on a real Redis Cluster (3 masters, no replicas,
// partial coverage: the two left keep serving their slots) and takes it
// through the cluster client of redistest, whose dial to the dead master
// is retried until the call's deadline, so that the dead group's call
// costs the whole store timeout. Marked WithPartial, the take is decided
// by the live masters' groups within that deadline (a PartialError naming
// the dead group's items; the live buckets charged exactly once); before,
// the live groups, sent after the dead one, failed on the expired deadline
// and the request failed whole.
func TestGroupsSentAtOnceClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, NodeTimeout: time.Second, PartialCoverage: true})
	cc := cl.Client()
	ctx := context.Background()
	// One key per master.
	keys, masters := cl.KeysOnMasters("llmguard:{t%d}:x", 3)
	r, err := bucket.NewRedis(bucket.RedisOptions{Client: cc})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	lim := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	items := make([]bucket.Item, 3)
	for i, k := range keys {
		items[i] = bucket.Item{Key: k, Limit: lim, Cost: 10}
	}
	if d, err := r.Take(ctx, "", items); err != nil || !d.Allowed {
		t.Fatalf("take with every master up: %+v, %v", d, err)
	}
	masters[0].Kill()
	const takes = 3
	for i := range takes {
		tctx, cancel := context.WithTimeout(bucket.WithPartial(ctx), 500*time.Millisecond)
		d, err := r.Take(tctx, bucket.NewRequestID(time.Now()), items)
		cancel()
		if pe := bucket.AsPartial(err); pe == nil || !slices.Equal(pe.Failed, []int{0}) || !d.Allowed {
			t.Fatalf("take %d with the first group's master down: %+v, %v; want allowed by the live masters, item 0 failed", i, d, err)
		}
	}
	for i, k := range keys[1:] {
		d, err := r.Take(ctx, "", []bucket.Item{{Key: k, Limit: lim}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Buckets[0].Remaining, int64(1000-(1+takes)*10); got != want && got != want+1 { // a refill of one unit at most
			t.Fatalf("live master %d's bucket holds %d, want %d: each take charged once", i+1, got, want)
		}
	}
}
