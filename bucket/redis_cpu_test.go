package bucket

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// TestRedisCPUPerTake is a measurement, not a check: it feeds a real
// redis-server (no valgrind) 400 batches of LLMGUARD_REDIS_CPU takes back
// to back, each take three token buckets and a NewRequestID id as in
// TestCallgrindScripts, and logs the server's process CPU (INFO cpu,
// user + sys) per take in µs. LLMGUARD_REDIS_CPU_PAUSE, a duration,
// makes the test wait that long between batches, so that each call finds
// Redis asleep as a proxy's calls do. Build it at two commits (go test -c)
// and run the binaries in turn for an A/B on one machine:
//
//	LLMGUARD_REDIS_CPU=32 go test -run TestRedisCPUPerTake -v ./bucket/
//	LLMGUARD_REDIS_CPU=32 LLMGUARD_REDIS_CPU_PAUSE=1ms go test -run TestRedisCPUPerTake -v ./bucket/
func TestRedisCPUPerTake(t *testing.T) {
	size, err := strconv.Atoi(os.Getenv("LLMGUARD_REDIS_CPU"))
	if err != nil || size < 1 {
		t.Skip("a measurement: set LLMGUARD_REDIS_CPU to the batch size (1 to 32)")
	}
	var pause time.Duration
	if v := os.Getenv("LLMGUARD_REDIS_CPU_PAUSE"); v != "" {
		if pause, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	c := redistest.Start(t).Client()
	ctx := context.Background()
	r, err := NewRedis(RedisOptions{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	limits := []Limit{{Capacity: 1e9, Rate: 1e9, Per: time.Second}, {Capacity: 1e6, Rate: 1e6, Per: time.Second}, {Capacity: 1e6, Rate: 1e6, Per: time.Second}}
	keys := []string{"llmguard:{t}:user:alice", "llmguard:{t}:tenant:acme", "llmguard:{t}:global"}
	run := func(batches int) {
		for range batches {
			time.Sleep(pause)
			batch := make([]*queuedTake, size)
			for i := range batch {
				items := []Item{{Key: keys[0], Limit: limits[0], Cost: 300}, {Key: keys[1], Limit: limits[1], Cost: 20}, {Key: keys[2], Limit: limits[2], Cost: 1}}
				k, a := r.takeArgs(NewRequestID(time.Now()), items, nil, true)
				batch[i] = &queuedTake{ctx: ctx, keys: k, args: a, done: make(chan struct{})}
			}
			if size == 1 {
				q := batch[0]
				q.reply, q.err = r.takes.lone(ctx, q.keys, q.args)
			} else {
				r.takes.send(batch)
			}
			for _, q := range batch {
				if q.err != nil || len(q.reply) == 0 || q.reply[0] != 1 {
					t.Fatalf("take: %v %v", q.reply, q.err)
				}
			}
		}
	}
	// cpu is the server's user + sys CPU so far, in seconds.
	cpu := func() float64 {
		var total float64
		for _, line := range strings.Split(c.Info(ctx, "cpu").Val(), "\r\n") {
			for _, field := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, ok := strings.CutPrefix(line, field); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatal(err)
					}
					total += f
				}
			}
		}
		return total
	}
	run(20) // warm: functions loaded, keys present
	const batches = 400
	before := cpu()
	run(batches)
	t.Logf("%.2f µs of redis-server CPU per take, batches of %d, %v between them", (cpu()-before)*1e6/float64(batches*size), size, pause)
}
