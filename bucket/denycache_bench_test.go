package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// BenchmarkDenyCache is what a DenyCache adds to a take of two buckets: on
// a miss (the store's take follows; here the memory store, so the
// difference is the cache's lookups) and on a hit (a denial from memory,
// no store call). README "Cached denials" quotes it.
func BenchmarkDenyCache(b *testing.B) {
	ctx := context.Background()
	mem := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
	defer mem.Close()
	roomy := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 50, Per: time.Second}
	items := []bucket.Item{{Key: "llmguard:{acme}:user-tpm:alice", Limit: roomy, Cost: 1}, {Key: "llmguard:{global}:all-tpm", Limit: roomy, Cost: 1}}
	b.Run("store alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mem.Take(ctx, "", items)
		}
	})
	c := bucket.NewDenyCache(mem, bucket.DenyCacheOptions{Window: time.Hour})
	defer c.Close()
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Take(ctx, "", items)
		}
	})
	empty := bucket.Limit{Capacity: 1, Rate: 1, Per: time.Hour}
	denied := []bucket.Item{items[0], {Key: "llmguard:{global}:empty", Limit: empty, Cost: 1}}
	c.Take(ctx, "", denied) // takes the one unit
	if d, _ := c.Take(ctx, "", denied); d.Allowed || d.Cached {
		b.Fatalf("%+v, want the store's denial", d)
	}
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := c.Take(ctx, "", denied); !d.Cached {
				b.Fatal("not cached")
			}
		}
	})
}
