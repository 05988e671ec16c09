package bucket_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// BenchmarkMemoryTake measures Take on the memory store from parallel
// goroutines, over 1024 tenants whose buckets never run dry: one bucket per
// request, four (key, user, tenant and a global one shared by all), and
// those four with the tenant's monthly quota.
func BenchmarkMemoryTake(b *testing.B) {
	big := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	month := time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)
	budget := bucket.Quota(1<<53, month, month.AddDate(100, 0, 0)) // never ends during the run
	const tenants = 1024
	items := func(n, t int) []bucket.Item {
		all := []bucket.Item{
			{Key: fmt.Sprintf("llmguard:{t%d}:rpm:key-%d", t, t), Limit: big, Cost: 1},
			{Key: fmt.Sprintf("llmguard:{t%d}:tpm:user-%d", t, t), Limit: big, Cost: 1500},
			{Key: fmt.Sprintf("llmguard:{t%d}:tpm:tenant", t), Limit: big, Cost: 1500},
			{Key: "llmguard:{global}:tpm:all", Limit: big, Cost: 1500},
			{Key: fmt.Sprintf("llmguard:{t%d}:usd:tenant", t), Limit: budget, Cost: 1500},
		}
		return all[:n]
	}
	for _, n := range []int{1, 4, 5} {
		b.Run(fmt.Sprintf("buckets=%d", n), func(b *testing.B) {
			m := bucket.NewMemory(bucket.MemoryOptions{})
			defer m.Close()
			sets := make([][]bucket.Item, tenants)
			for t := range sets {
				sets[t] = items(n, t)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				t := int(next.Add(1))
				ctx := context.Background()
				for pb.Next() {
					t = (t + 1) % tenants
					if d, err := m.Take(ctx, "", sets[t]); err != nil || !d.Allowed {
						b.Fatalf("%+v, %v", d, err)
					}
				}
			})
		})
	}
}

// BenchmarkMemoryShards measures parallel one-bucket takes on distinct keys
// (every goroutine its own tenants) with the key space in one lock
// (shards=1, as a single store-wide mutex would be) and in the default 64
// shards, in the same run; the sharded run reports its speed-up over the
// single lock as x-one-lock (above 1: faster). Run it with -cpu 1,2,4… to
// see the scaling:
//
//	go test -run XXX -bench MemoryShards -cpu 1,2 ./bucket
func BenchmarkMemoryShards(b *testing.B) {
	lim := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	const keys = 4096
	sets := make([][]bucket.Item, keys)
	for i := range sets {
		sets[i] = []bucket.Item{{Key: fmt.Sprintf("llmguard:{t%d}:tpm:user-%d", i, i), Limit: lim, Cost: 1500}}
	}
	oneLock := map[int]float64{} // ns/op of shards=1 by GOMAXPROCS (-cpu runs each sub-benchmark for every value)
	for _, shards := range []int{1, 0} {
		name := "shards=64"
		if shards == 1 {
			name = "shards=1"
		}
		b.Run(name, func(b *testing.B) {
			m := bucket.NewMemory(bucket.MemoryOptions{Shards: shards, SweepEvery: -1})
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Worker w takes keys w, w+64, w+128…: no two workers share a key.
				w := int(worker.Add(1)-1) % 64
				i := w
				ctx := context.Background()
				for pb.Next() {
					if d, err := m.Take(ctx, "", sets[i]); err != nil || !d.Allowed {
						b.Fatalf("%+v, %v", d, err)
					}
					if i += 64; i >= keys {
						i = w
					}
				}
			})
			b.StopTimer()
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			procs := runtime.GOMAXPROCS(0)
			if shards == 1 {
				oneLock[procs] = ns
			} else if oneLock[procs] > 0 {
				b.ReportMetric(oneLock[procs]/ns, "x-one-lock")
			}
		})
	}
}
