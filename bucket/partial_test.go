package bucket_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
)

// partialRig is a Redis store in cluster mode on miniredis whose slot
// group "{b}" fails every call (groupFailClient, never holding "{a}"), on
// a fixed clock, and the items of a take over both groups.
type partialRig struct {
	r     *bucket.Redis
	lim   bucket.Limit
	items []bucket.Item
}

func newPartialRig(t *testing.T) *partialRig {
	t.Helper()
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	now := time.Unix(1_700_000_000, 0)
	client := &groupFailClient{RedisScripter: rc, release: make(chan struct{})}
	close(client.release)
	r := newRedis(t, bucket.RedisOptions{Client: client, Cluster: true, TakeBatch: 1, Now: func() time.Time { return now }})
	lim := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	return &partialRig{r: r, lim: lim, items: []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 10}, {Key: "llmguard:{b}:y", Limit: lim, Cost: 10}}}
}

// levelA is what group {a}'s bucket holds (a cost-0 take).
func (p *partialRig) levelA(t *testing.T) int64 {
	t.Helper()
	d, err := p.r.Take(context.Background(), "", []bucket.Item{{Key: "llmguard:{a}:x", Limit: p.lim}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Buckets[0].Remaining
}

// With WithPartial, a take whose second slot group fails is served for
// the first: the Decision admits it with {a} charged, the PartialError
// names item 1; an AsyncReconciler over the store voids only the failed
// item, so {a}'s take stands. Without the mark the take fails whole and
// {a} is refunded (TestFailedGroupRefundDoesNotHoldTheRequest).
func TestPartialTakeServesTheLiveGroup(t *testing.T) {
	p := newPartialRig(t)
	async := bucket.NewAsyncReconciler(p.r, bucket.AsyncOptions{})
	t.Cleanup(func() { async.Close() })
	id := bucket.NewRequestID(time.Now())
	d, err := async.Take(bucket.WithPartial(context.Background()), id, p.items)
	pe := bucket.AsPartial(err)
	if pe == nil || len(pe.Failed) != 1 || pe.Failed[0] != 1 || !d.Allowed || d.Buckets[0].Remaining != 90 {
		t.Fatalf("take: %+v, %v; want allowed with {a} at 90 and item 1 failed", d, err)
	}
	if !bucket.MayHaveApplied(err) {
		t.Fatalf("MayHaveApplied(%v) false: the failed group's take may have run", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := async.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.levelA(t); got != 90 {
		t.Fatalf("after the voids: {a} holds %d, want 90: only the failed group is voided", got)
	}
	if st := async.Stats(); st.Voids != 1 {
		t.Fatalf("%d voids queued, want 1 (the failed group's)", st.Voids)
	}

	// Without the mark: one error, not a PartialError.
	_, err = p.r.Take(context.Background(), "", p.items)
	if err == nil || bucket.AsPartial(err) != nil {
		t.Fatalf("unmarked take: %v, want a whole failure", err)
	}
}

// A take over only the failed group is a failure, whole, even with the
// mark: nothing was served.
func TestPartialTakeAllFailedIsWhole(t *testing.T) {
	p := newPartialRig(t)
	_, err := p.r.Take(bucket.WithPartial(context.Background()), "", []bucket.Item{p.items[1], {Key: "llmguard:{c}:z{b}", Limit: p.lim, Cost: 1}}) // two groups, both failing
	if err == nil || bucket.AsPartial(err) != nil {
		t.Fatalf("take: %v, want a whole failure", err)
	}
}

// In a Guarded store with a breaker per master, a take spanning a master
// whose breaker is open is sent for the other master's items
// (PartialError naming the rest, not sent: MayHaveApplied false), and a
// take of that master alone is rejected whole: the breaker's last
// failure, a PartialError, does not make the rejection read as one.
func TestPartialGuardedSendsClosedMasters(t *testing.T) {
	p := newPartialRig(t)
	g := bucket.NewGuarded(p.r, bucket.GuardOptions{MinCalls: 2, OpenFor: time.Hour, MasterOf: func(key string) string {
		if strings.Contains(key, "{b}") {
			return "m2"
		}
		return "m1"
	}})
	ctx := bucket.WithPartial(context.Background())
	for i := range 2 { // each fails on m2: its breaker opens
		if _, err := g.Take(ctx, "", p.items); bucket.AsPartial(err) == nil {
			t.Fatalf("take %d: %v, want a PartialError", i, err)
		}
	}
	if got := p.levelA(t); got != 80 {
		t.Fatalf("{a} holds %d, want 80: both takes served there", got)
	}
	_, err := g.Take(ctx, "", p.items[1:])
	if !errors.Is(err, bucket.ErrNotSent) || bucket.AsPartial(err) != nil {
		t.Fatalf("take of m2 alone: %v, want a whole rejection", err)
	}
	d, err := g.Take(ctx, "", p.items)
	pe := bucket.AsPartial(err)
	if pe == nil || len(pe.Failed) != 1 || pe.Failed[0] != 1 || !d.Allowed || d.DeniedBy != -1 || d.Buckets[0].Remaining != 70 {
		t.Fatalf("take past the open breaker: %+v, %v; want allowed with {a} at 70 and item 1 failed", d, err)
	}
	if bucket.MayHaveApplied(err) {
		t.Fatalf("MayHaveApplied(%v): the failed item was never sent", err)
	}
	// A denial by the served master: not allowed, DeniedBy names item 0.
	big := []bucket.Item{{Key: "llmguard:{a}:x", Limit: p.lim, Cost: 80}, p.items[1]}
	d, err = g.Take(ctx, "", big)
	if bucket.AsPartial(err) == nil || d.Allowed || d.DeniedBy != 0 {
		t.Fatalf("denied take: %+v, %v; want denied by item 0 with a PartialError", d, err)
	}
	if got := p.levelA(t); got != 70 {
		t.Fatalf("{a} holds %d after the denial, want 70: a denial spends nothing", got)
	}
}
