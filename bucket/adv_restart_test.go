package bucket_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestRedisRestartConcurrentFirstCalls: after a restart (library and state
// gone), many takes sent at once all miss the library; each is applied
// exactly once, and none is lost or fails.
func TestRedisRestartConcurrentFirstCalls(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { client.Close() })
	for _, batch := range []int{1, 8} {
		r := newRedis(t, bucket.RedisOptions{Client: client, TakeBatch: batch})
		srv.Restart()
		limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
		key := "llmguard:{r" + strconv.Itoa(batch) + "}:a"
		const n = 24
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := r.Take(ctx, "id"+strconv.Itoa(i), []bucket.Item{{Key: key, Limit: limit, Cost: 1}})
				if err == nil && !d.Allowed {
					err = context.Canceled
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("batch %d: take after restart: %v", batch, err)
			}
		}
		probe, err := r.Take(ctx, "probe", []bucket.Item{{Key: key, Limit: limit, Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := probe.Buckets[0].Remaining; got != 1000-n-1 {
			t.Errorf("batch %d: %d left after %d takes and a probe; want %d", batch, got, n, 1000-n-1)
		}
	}

	// Reconciliations of one request id sent at once after a restart
	// (each missing the library) are applied once.
	r := newRedis(t, bucket.RedisOptions{Client: client})
	srv.Restart()
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	key := "llmguard:{rc}:a"
	if _, err := r.Take(ctx, "t0", []bucket.Item{{Key: key, Limit: limit, Cost: 100}}); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // the state goes too: start again from a take
	if _, err := r.Take(ctx, "t1", []bucket.Item{{Key: key, Limit: limit, Cost: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := client.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Reconcile(ctx, "t1", []bucket.Delta{{Key: key, Limit: limit, Units: 10}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	probe, err := r.Take(ctx, "probe", []bucket.Item{{Key: key, Limit: limit, Cost: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := probe.Buckets[0].Remaining; got != 1000-100-10-1 {
		t.Errorf("reconciled at once after a flush: %d left; want %d (one reconciliation of 10)", got, 1000-100-10-1)
	}
}
