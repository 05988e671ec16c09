package bucket_test

import (
	"context"
	"fmt"
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
