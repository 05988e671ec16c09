package bucket_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// tagsDownClient runs scripts on a real server but fails every call whose
// first key holds one of down's hash tags: those slot groups' masters are
// down.
type tagsDownClient struct {
	bucket.RedisScripter
	down []string
}

func (c *tagsDownClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if len(keys) > 0 && slices.ContainsFunc(c.down, func(tag string) bool { return strings.Contains(keys[0], tag) }) {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errors.New("injected: this slot group's master is down"))
		return cmd
	}
	return c.RedisScripter.EvalSha(ctx, sha, keys, args...)
}

// opened collects the masters whose breakers opened (OnStateChange).
type opened struct {
	mu      sync.Mutex
	masters []string
}

func (o *opened) note(master string, _, to bucket.BreakerState) {
	if to == bucket.BreakerOpen {
		o.mu.Lock()
		o.masters = append(o.masters, master)
		o.mu.Unlock()
	}
}

func (o *opened) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.masters))
}

// A take served in part whose slot groups failed on two masters ({b} on
// m2, {c} on m3) counts a failure against each of them: both breakers
// open after MinCalls such takes, and m1's, which served, stays closed.
// Before, only the first failed group's master (m2) counted: m3's breaker
// never opened, and every request waited out its failing call.
func TestPartialEachFailedMasterCountsItsOwn(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	r := newRedis(t, bucket.RedisOptions{Client: &tagsDownClient{RedisScripter: rc, down: []string{"{b}", "{c}"}}, Cluster: true, TakeBatch: 1})
	var o opened
	g := bucket.NewGuarded(r, bucket.GuardOptions{MinCalls: 3, OpenFor: time.Hour, OnStateChange: o.note, MasterOf: func(key string) string {
		switch {
		case strings.Contains(key, "{b}"):
			return "m2"
		case strings.Contains(key, "{c}"):
			return "m3"
		}
		return "m1"
	}})
	lim := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	items := []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 10}, {Key: "llmguard:{b}:y", Limit: lim, Cost: 10}, {Key: "llmguard:{c}:z", Limit: lim, Cost: 10}}
	ctx := bucket.WithPartial(context.Background())
	for i := range 3 {
		d, err := g.Take(ctx, "", items)
		if pe := bucket.AsPartial(err); pe == nil || !slices.Equal(pe.Failed, []int{1, 2}) || !d.Allowed {
			t.Fatalf("take %d: %+v, %v; want allowed by {a} with items 1 and 2 failed", i, d, err)
		}
	}
	if got := o.list(); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("breakers opened: %v, want m2 and m3: each failing master counts its own failure", got)
	}
}

// TestPartialClusterTwoMastersDown kills two masters of a real Redis
// Cluster (5 masters, no replicas, partial coverage: the three left are a
// majority, so the cluster stays up and serves their slots; with three
// masters, one left alone answers CLUSTERDOWN for every key) and takes,
// through Guarded with a breaker per master, a request whose buckets live
// on all three: each take is served by the live master, its bucket there
// charged exactly, and both dead masters' breakers open, the live one's
// staying closed.
func TestPartialClusterTwoMastersDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 5, NodeTimeout: time.Second, PartialCoverage: true})
	cc := cl.Client()
	ctx := context.Background()
	// One key per master, in the order of the masters' slot ranges.
	keys, masters := cl.KeysOnMasters("llmguard:{t%d}:x", 3)
	r, err := bucket.NewRedis(bucket.RedisOptions{Client: cc})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	var o opened
	g := bucket.NewGuarded(r, bucket.GuardOptions{Timeout: 2 * time.Second, MinCalls: 3, OpenFor: time.Hour, OnStateChange: o.note,
		MasterOf: func(key string) string {
			c, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return ""
			}
			return c.Options().Addr
		}})
	lim := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	items := make([]bucket.Item, 3)
	for i, k := range keys {
		items[i] = bucket.Item{Key: k, Limit: lim, Cost: 10}
	}
	if d, err := g.Take(ctx, "", items); err != nil || !d.Allowed {
		t.Fatalf("take with every master up: %+v, %v", d, err)
	}
	masters[1].Kill()
	masters[2].Kill()
	const takes = 3 // MinCalls: each dead master opens on the last only when every take counted against it
	for i := range takes {
		d, err := g.Take(bucket.WithPartial(ctx), "", items)
		if pe := bucket.AsPartial(err); pe == nil || !slices.Equal(pe.Failed, []int{1, 2}) || !d.Allowed {
			t.Fatalf("take %d with two masters down: %+v, %v; want allowed by the live master, items 1 and 2 failed", i, d, err)
		}
	}
	d, err := r.Take(ctx, "", []bucket.Item{{Key: keys[0], Limit: lim}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Buckets[0].Remaining, int64(1000-(1+takes)*10); got != want && got != want+1 { // a refill of one unit at most
		t.Fatalf("the live master's bucket holds %d, want %d: each take charged once", got, want)
	}
	want := []string{masters[1].Addr(), masters[2].Addr()}
	slices.Sort(want)
	if got := o.list(); !slices.Equal(got, want) {
		t.Fatalf("breakers opened: %v, want %v: each dead master counts its own failures, the live one none", got, want)
	}
}
