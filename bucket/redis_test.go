package bucket_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// newRedis returns a Redis store over client with its scripts loaded.
func newRedis(t testing.TB, o bucket.RedisOptions) *bucket.Redis {
	t.Helper()
	r, err := bucket.NewRedis(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedisContractMiniredis runs the contract on miniredis, whose TIME (the
// scripts' clock) follows the suite's clock. It needs no redis-server.
func TestRedisContractMiniredis(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		mr := miniredis.RunT(t)
		clock.OnSet(mr.SetTime)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { c.Close() })
		return newRedis(t, bucket.RedisOptions{Client: c})
	})
}

// TestRedisContractServer runs the contract on a real redis-server, the
// clock passed in ARGV.
func TestRedisContractServer(t *testing.T) {
	c := redistest.Shared(t).Client()
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		return newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	})
}

// TestRedisContractCluster runs the contract on a Redis Cluster of three
// masters (each timeline's keys share a hash tag, so one slot).
func TestRedisContractCluster(t *testing.T) {
	c := redistest.SharedCluster(t, 3).Client()
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		return newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	})
}

// TestRedisContractClusterSplit runs the contract on a Redis Cluster with
// every key forced into a slot of its own: each multi-bucket take runs one
// script per bucket, refunding on a denial, and must still decide as one
// script (and the memory store) would.
func TestRedisContractClusterSplit(t *testing.T) {
	c := redistest.SharedCluster(t, 3).Client()
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		return &untagged{newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})}
	})
}

// untagged strips the braces of the suite's hash tag from every key, so that
// a timeline's keys spread over the cluster's slots.
type untagged struct{ s bucket.Store }

func untag(key string) string {
	b := []byte(key)
	out := b[:0]
	for _, c := range b {
		if c != '{' && c != '}' {
			out = append(out, c)
		}
	}
	return string(out)
}

func (u *untagged) Take(ctx context.Context, requestID string, items []bucket.Item) (bucket.Decision, error) {
	return u.s.Take(ctx, requestID, untagItems(items))
}

func (u *untagged) Void(ctx context.Context, requestID string, items []bucket.Item) error {
	return u.s.Void(ctx, requestID, untagItems(items))
}

func untagItems(items []bucket.Item) []bucket.Item {
	items = append([]bucket.Item(nil), items...)
	for i := range items {
		items[i].Key = untag(items[i].Key)
	}
	return items
}

func (u *untagged) Reconcile(ctx context.Context, requestID string, deltas []bucket.Delta) error {
	deltas = append([]bucket.Delta(nil), deltas...)
	for i := range deltas {
		deltas[i].Key = untag(deltas[i].Key)
	}
	return u.s.Reconcile(ctx, requestID, deltas)
}

// TestAsyncReconcilerContract runs the contract on a real redis-server
// behind an AsyncReconciler, flushed after each Reconcile: the queue changes
// when deltas apply, never what they do.
func TestAsyncReconcilerContract(t *testing.T) {
	c := redistest.Shared(t).Client()
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		a := bucket.NewAsyncReconciler(newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now}), bucket.AsyncOptions{})
		t.Cleanup(func() {
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		})
		return flushing{a}
	})
}

type flushing struct{ *bucket.AsyncReconciler }

func (f flushing) Reconcile(ctx context.Context, requestID string, deltas []bucket.Delta) error {
	if err := f.AsyncReconciler.Reconcile(ctx, requestID, deltas); err != nil {
		return err
	}
	return f.Flush(ctx)
}

func (f flushing) Void(ctx context.Context, requestID string, items []bucket.Item) error {
	if err := f.AsyncReconciler.Void(ctx, requestID, items); err != nil {
		return err
	}
	return f.Flush(ctx)
}

func TestNewRedisWithoutClient(t *testing.T) {
	if _, err := bucket.NewRedis(bucket.RedisOptions{}); err == nil {
		t.Fatal("NewRedis without a client: no error")
	}
}
