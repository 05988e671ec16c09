package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// BenchmarkGuardedTake is a take of three buckets (a tenant's two and a
// global one) through a Guarded store over Memory: the breaker's cost on
// the request's path. With one breaker, as a single Redis has.
func BenchmarkGuardedTake(b *testing.B) {
	benchGuardedTake(b, bucket.GuardOptions{Timeout: time.Hour})
}

func benchGuardedTake(b *testing.B, o bucket.GuardOptions) {
	mem := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
	defer mem.Close()
	g := bucket.NewGuarded(mem, o)
	lim := bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{
		{Key: "llmguard:{acme}:rps:alice", Limit: lim, Cost: 1},
		{Key: "llmguard:{acme}:tpm:acme", Limit: lim, Cost: 1},
		{Key: "llmguard:{global}:tpm:all", Limit: lim, Cost: 1},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Take(ctx, "", items); err != nil {
			b.Fatal(err)
		}
	}
}
