package bucket_test

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkTakeLatencyUnderLoad measures the latency of a Take of three
// buckets (user, tenant, global) against a real redis-server started for the
// run, from 16 concurrent callers on a client set up as the proxy's
// (internal/app/store.go: deadline-driven, no retries), and reports its
// p50, p99, p99.9 and maximum in milliseconds, the share of calls (%) that
// a deadline of 5, 25 and 50 ms would have failed, and how often a breaker
// would then have opened on this healthy Redis (opens-old@5ms: the old rule,
// 5 failures in a row; opens@D: the current defaults): the figures
// store.timeout is chosen from (README, "Store timeouts"). Each call gets a one-second
// deadline, so that a slow call is measured rather than cut.
//
// It runs three ways: on the machine as it is ("quiet": on a shared CI box,
// other jobs already compete), with 2×GOMAXPROCS `yes > /dev/null`
// processes competing with Redis and the client for the CPU ("yes-procs",
// a noisy neighbour), and with as many goroutines spinning in the client's
// own process ("spin-goroutines", a busy proxy). The processes are started
// for the sub-benchmark and killed, by their pid, when it ends.
//
// Run it with a fixed count so that p99.9 rests on enough calls:
//
//	go test -run XXX -bench TakeLatencyUnderLoad -benchtime 20000x ./bucket
func BenchmarkTakeLatencyUnderLoad(b *testing.B) {
	s := redistest.Start(b)
	c := redis.NewClient(&redis.Options{
		Addr: s.Addr(), PoolSize: 64, MinIdleConns: 16,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		ReadTimeout: time.Second, WriteTimeout: time.Second, DialTimeout: time.Second,
	})
	b.Cleanup(func() { c.Close() })
	r := newRedis(b, bucket.RedisOptions{Client: c})
	big := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	items := []bucket.Item{
		{Key: "llmguard:{acme}:rpm:alice", Limit: big, Cost: 1},
		{Key: "llmguard:{acme}:tpm:acme", Limit: big, Cost: 1500},
		{Key: "llmguard:{global}:tpm", Limit: big, Cost: 1500},
	}
	hogs := 2 * runtime.GOMAXPROCS(0)
	for _, load := range []string{"quiet", "yes-procs", "spin-goroutines"} {
		b.Run(load, func(b *testing.B) {
			stop := startHog(b, load, hogs)
			defer stop()
			const callers = 16
			lat := make([]time.Duration, b.N)
			ends := make([]time.Time, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						t0 := time.Now()
						_, err := r.Take(ctx, "", items)
						ends[i] = time.Now()
						lat[i] = ends[i].Sub(t0)
						cancel()
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			// How often a breaker would have opened on this healthy Redis,
			// had every call past a deadline failed: the old rule (5
			// failures in a row) at the old 5 ms, and the current one
			// (GuardOptions' defaults) at 5, 25 and 50 ms.
			byEnd := make([]int, len(lat))
			for i := range byEnd {
				byEnd[i] = i
			}
			slices.SortFunc(byEnd, func(i, j int) int { return ends[i].Compare(ends[j]) })
			failed := func(d time.Duration) []bool {
				f := make([]bool, len(byEnd))
				for k, i := range byEnd {
					f[k] = lat[i] > d
				}
				return f
			}
			b.ReportMetric(float64(opens(failed(5*time.Millisecond), 5, 1)), "opens-old@5ms")
			for _, d := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond} {
				b.ReportMetric(float64(opens(failed(d), 20, 0.5)), fmt.Sprintf("opens@%dms", d/time.Millisecond))
			}
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(0.999), "p99.9-ms")
			b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "max-ms")
			// The share of calls a deadline of 5, 25 and 50 ms would fail.
			for _, d := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond} {
				over := len(lat) - sort.Search(len(lat), func(i int) bool { return lat[i] > d })
				b.ReportMetric(100*float64(over)/float64(len(lat)), fmt.Sprintf("%%>%dms", d/time.Millisecond))
			}
		})
	}
}

// opens counts how often a breaker rule would open over calls in the order
// they ended (failed[k]: the k-th to end failed): minCalls failures in a
// row, or at least ratio of at least minCalls calls (ratio 1 and minCalls
// n: n in a row). The counts start again after each opening, as the
// breaker's do; the run is shorter than the default 10 s window, so the
// window is the whole run.
func opens(failed []bool, minCalls int, ratio float64) int {
	n, ended, fails, run := 0, 0, 0, 0
	for _, f := range failed {
		ended++
		if !f {
			run = 0
			continue
		}
		fails++
		run++
		if run >= minCalls || (ended >= minCalls && float64(fails) >= ratio*float64(ended)) {
			n++
			ended, fails, run = 0, 0, 0
		}
	}
	return n
}

// startHog starts the CPU load named by load with n hogs and returns the
// function that stops it.
func startHog(b *testing.B, load string, n int) func() {
	b.Helper()
	switch load {
	case "yes-procs":
		var cmds []*exec.Cmd
		for range n {
			cmd := exec.Command("yes") // stdout nil: /dev/null
			if err := cmd.Start(); err != nil {
				b.Skipf("cannot start yes: %v", err)
			}
			cmds = append(cmds, cmd)
		}
		return func() {
			for _, cmd := range cmds {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	case "spin-goroutines":
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := 0
				for !stop.Load() {
					for i := range 1000 {
						x += i
					}
				}
				_ = fmt.Sprint(x)
			}()
		}
		return func() { stop.Store(true); wg.Wait() }
	}
	return func() {}
}
