package bucket_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkRedisTake measures, against one real redis-server started for
// the run, a plain PING round trip and one Take of 1 and of 3 buckets (user,
// tenant and global, all allowed) on Redis TIME. The take sub-benchmarks
// report their ns/op as a multiple of the PING's (x-ping): the cost of the
// script over the round trip every store call pays anyway — and the time
// Redis itself spent per call (server-ns/op, from INFO commandstats).
// Sequential calls measure latency; the -parallel ones throughput over a
// pool.
func BenchmarkRedisTake(b *testing.B) {
	ctx := context.Background()
	c := redistest.Start(b).Client()
	r := newRedis(b, bucket.RedisOptions{Client: c})
	big := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{
		{Key: "llmguard:{acme}:rpm:alice", Limit: big, Cost: 1},
		{Key: "llmguard:{acme}:tpm:acme", Limit: big, Cost: 1500},
		{Key: "llmguard:{global}:tpm", Limit: big, Cost: 1500},
	}

	var pingNs [2]float64 // sequential, parallel
	for p, parallel := range []bool{false, true} {
		suffix := ""
		if parallel {
			suffix = "-parallel"
		}
		run := func(name, cmd string, op func() error, ratio bool) {
			b.Run(name+suffix, func(b *testing.B) {
				b.ReportAllocs()
				calls0, usec0 := serverTime(b, c, cmd)
				b.ResetTimer()
				if parallel {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := op(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				} else {
					for b.Loop() {
						if err := op(); err != nil {
							b.Fatal(err)
						}
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if calls, usec := serverTime(b, c, cmd); calls > calls0 {
					b.ReportMetric(float64(usec-usec0)*1000/float64(calls-calls0), "server-ns/op")
				}
				if !ratio {
					pingNs[p] = ns
				} else if pingNs[p] > 0 {
					b.ReportMetric(ns/pingNs[p], "x-ping")
				}
			})
		}
		run("ping", "ping", func() error { return c.Ping(ctx).Err() }, false)
		for _, n := range []int{1, 3} {
			set := items[:n]
			run(fmt.Sprintf("take-%d", n), "evalsha", func() error {
				d, err := r.Take(ctx, "", set)
				if err == nil && !d.Allowed {
					err = fmt.Errorf("denied: %+v", d)
				}
				return err
			}, true)
		}
	}
}

// serverTime returns how many times Redis ran cmd and the µs it spent in
// them (INFO commandstats), without the round trips.
func serverTime(b *testing.B, c *redis.Client, cmd string) (calls, usec int64) {
	b.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}
