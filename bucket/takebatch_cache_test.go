package bucket_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestTakeBatchReadsItsLibrarysWrites: in a Redis Functions library
// takebatch.lua reads a bucket value an earlier call of the library wrote
// by one lookup (core.lua's encodedLevel, filled by the flush's encode),
// in runTokens and in takeTokens, instead of parse and load; an EVAL script
// (miniredis) starts each call with the tables empty and parses every
// value. Both must give the same replies and store the same values, bit
// for bit: batches of four takes on three shared token buckets, at a
// pinned clock that moves between batches, run on miniredis and on a real
// redis-server. Each batch has two takes with ids of NewRequestID's form
// (a run runTokens takes) and two with marker keys (takeTokens), the first
// take of the batch alternating between the two, so that each reads the
// last batch's writes.
func TestTakeBatchReadsItsLibrarysWrites(t *testing.T) {
	start := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	limits := []bucket.Limit{
		{Capacity: 5000, Rate: 3, Per: time.Second},
		{Capacity: 700, Rate: 7, Per: time.Minute},
		{Capacity: 90, Rate: 11, Per: 13 * time.Second},
	}
	const batches = 8
	type round struct {
		results []takeResult
		values  []string
	}
	run := func(t *testing.T, backend string) []round {
		now := start
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
		r := newRedis(t, bucket.RedisOptions{Client: c, Now: func() time.Time { return now }})
		keys := []string{"k:{PFX}:cache:user", "k:{PFX}:cache:tenant", "k:{PFX}:cache:global"}
		items := func(b, i int) []bucket.Item {
			out := make([]bucket.Item, len(keys))
			for j, k := range keys {
				out[j] = bucket.Item{Key: k, Limit: limits[j], Cost: int64(1 + (b*7+i*3+j*5)%9)}
			}
			return out
		}
		var rounds []round
		for b := range batches {
			var steps []takeBatchStep
			for i := range 4 {
				id := fmt.Sprintf("cache-r%d-%d", b, i) // a marker key: takeTokens
				if (i+b)%2 == 0 {
					id = setID(now, uint64(100*b+i)) // the epoch's sets: runTokens
				}
				steps = append(steps, takeBatchStep{name: id, id: id, items: items(b, i)})
			}
			rd := round{results: runQueued(t, r, 0, steps, "cache17")}
			for _, k := range keys {
				v, err := c.Get(ctx, "k:{cache17}:cache:"+k[len("k:{PFX}:cache:"):]).Result()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				rd.values = append(rd.values, v)
			}
			rounds = append(rounds, rd)
			now = now.Add(1234567 * time.Microsecond)
		}
		return rounds
	}
	mini := run(t, "miniredis")
	real := run(t, "redis-server")
	for b := range batches {
		if !reflect.DeepEqual(real[b].results, mini[b].results) {
			t.Errorf("batch %d: replies on redis-server %+v, on miniredis %+v", b, real[b].results, mini[b].results)
		}
		if !reflect.DeepEqual(real[b].values, mini[b].values) {
			t.Errorf("batch %d: stored values on redis-server %q, on miniredis %q", b, real[b].values, mini[b].values)
		}
	}
	if t.Failed() {
		return
	}
	// The timeline must take from the buckets (not leave them full and
	// missing, where every read is load's full bucket).
	for b, rd := range real {
		for i, v := range rd.values {
			if v == "" {
				t.Errorf("batch %d: bucket %d not stored", b, i)
			}
		}
	}
}
