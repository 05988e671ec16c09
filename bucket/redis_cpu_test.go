package bucket

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkRedisCPUPerTake measures what a take costs a real redis-server
// (no valgrind): it sends b.N takes in batches of the sub-benchmark's size,
// back to back or with a pause before each batch (so that each call finds
// Redis asleep, as a proxy's calls do), each take three token buckets and
// a NewRequestID id as in TestCallgrindScripts, and reports the server's
// process CPU (INFO cpu, user + sys) per take as redis-cpu-us/take. ns/op
// is the client's time per take, pauses included: read the metric. A
// batch of 1 is a lone take (take.lua), larger ones one call of
// takebatch.lua. Build the test binary at two commits (go test -c) and run
// them in turn for an A/B on one machine. README's figures ran 400
// batches: -benchtime 12800x for batches of 32, 6400x for 16.
//
//	go test -run XXX -bench 'BenchmarkRedisCPUPerTake/^batch32$' -benchtime 12800x -count 5 ./bucket/
//	go test -run XXX -bench 'BenchmarkRedisCPUPerTake/^batch16-pause1ms$' -benchtime 6400x -count 5 ./bucket/
func BenchmarkRedisCPUPerTake(b *testing.B) {
	c := redistest.Start(b).Client()
	ctx := context.Background()
	r, err := NewRedis(RedisOptions{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		size  int
		pause time.Duration
	}{
		{name: "batch1", size: 1},
		{name: "batch32", size: 32},
		{name: "batch16-pause1ms", size: 16, pause: time.Millisecond},
		{name: "batch32-pause1ms", size: 32, pause: time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			id := func() string { return NewRequestID(time.Now()) }
			run := func(batches int) { runTakes(b, r, len(scriptKeys), id, bc.size, batches, bc.pause) }
			run(20) // warm: functions loaded, keys present
			batches := (b.N + bc.size - 1) / bc.size
			before := redisCPU(b, c.Info(ctx, "cpu").Val())
			b.ResetTimer()
			run(batches)
			b.StopTimer()
			used := redisCPU(b, c.Info(ctx, "cpu").Val()) - before
			b.ReportMetric(used*1e6/float64(batches*bc.size), "redis-cpu-us/take")
		})
	}
}

// redisCPU is the user + sys CPU, in seconds, that an INFO cpu reply
// (info) reports the server used so far.
func redisCPU(b *testing.B, info string) float64 {
	b.Helper()
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, field := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += f
			}
		}
	}
	return total
}
