package bucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redisstats"
	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkSlidingWindowTakeWork measures, on one redis-server started for
// the run, an admitted take of a sliding window and a token bucket with a
// request id, sent one at a time (a lone take in the generic layout): what
// Redis did per take (INFO commandstats: commands, scripts, µs inside
// commands), for the cost of the statuses before the take that such a
// take replies since redis28. Run it on each build, alternating: µs are
// the machine's, compare them within one run.
func BenchmarkSlidingWindowTakeWork(b *testing.B) {
	ctx := context.Background()
	c := redistest.Shared(b).Client()
	r := newRedis(b, bucket.RedisOptions{Client: c})
	run := fmt.Sprintf("sw-%d-%d", b.N, time.Now().UnixNano())
	items := []bucket.Item{
		{Key: "llmguard:{" + run + "}:rpm", Limit: bucket.Window(bucket.SlidingWindow, 1<<50, time.Minute), Cost: 1},
		{Key: "llmguard:{" + run + "}:tpm", Limit: bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}, Cost: 1500},
	}
	if err := redisstats.Reset(ctx, c); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		d, err := r.Take(ctx, bucket.NewRequestID(time.Now()), items)
		if err != nil || !d.Allowed {
			b.Fatalf("take: %+v, %v", d, err)
		}
	}
	b.StopTimer()
	got, err := redisstats.Read(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	per := got.Per(int64(b.N))
	b.ReportMetric(per.Calls, "cmds/op")
	b.ReportMetric(per.Scripts, "scripts/op")
	b.ReportMetric(per.Usec, "redis-us/op")
}
