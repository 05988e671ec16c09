package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkLeasedHotKey measures takes of one hot bucket (a tenant's
// requests limit, 1 unit each) from 16 callers per CPU against a real
// redis-server started for the run: plain (every take a round trip) and
// through a Leased store with leases of 100 units (a round trip per lease).
// It reports the store calls per take (calls/op) beside ns/op; the limit is
// far above the load, so every take is admitted.
func BenchmarkLeasedHotKey(b *testing.B) {
	c := redistest.Start(b).Client()
	limit := bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}
	for _, tc := range []struct {
		name  string
		lease bucket.Lease
	}{
		{"plain", bucket.Lease{}},
		{"leased-10", bucket.Lease{Size: 10, TTL: 100 * time.Millisecond, Label: "hot"}},
		{"leased-100", bucket.Lease{Size: 100, TTL: 100 * time.Millisecond, Label: "hot"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := &counting{Store: newRedis(b, bucket.RedisOptions{Client: c})}
			l := bucket.NewLeased(store, bucket.LeaseOptions{})
			defer l.Close()
			item := bucket.Item{Key: "llmguard:{acme}:rps:acme-" + tc.name, Limit: limit, Cost: 1, Lease: tc.lease}
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				items := []bucket.Item{item}
				for pb.Next() {
					d, err := l.Take(context.Background(), "", items)
					if err != nil || !d.Allowed {
						b.Errorf("take: %+v %v", d, err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(store.calls())/float64(b.N), "calls/op")
		})
	}
}
