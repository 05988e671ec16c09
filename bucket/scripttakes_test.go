package bucket

import (
	"context"
	"testing"
	"time"
)

// scriptLimits and scriptKeys are the three token buckets (a user's, a
// tenant's, the global one, in one slot) whose takes TestCallgrindScripts
// and BenchmarkRedisCPUPerTake feed a real redis-server.
var (
	scriptLimits = []Limit{
		{Capacity: 1e9, Rate: 1e9, Per: time.Second},
		{Capacity: 1e6, Rate: 1e6, Per: time.Second},
		{Capacity: 1e6, Rate: 1e6, Per: time.Second},
	}
	scriptKeys = []string{"llmguard:{t}:user:alice", "llmguard:{t}:tenant:acme", "llmguard:{t}:global"}
)

// runTakes sends r batches of size takes, pause before each, as a proxy
// sends them: a batch of 1 as a lone take (take.lua; through
// takebatch.lua when r.takes.alone), a larger one in one call of
// takebatch.lua. Each take costs 300, 20 and 1 of the first n of the
// scriptKeys buckets, with the request id id returns ("": none). Every
// take must be admitted.
func runTakes(tb testing.TB, r *Redis, n int, id func() string, size, batches int, pause time.Duration) {
	tb.Helper()
	ctx := context.Background()
	for range batches {
		if pause > 0 {
			time.Sleep(pause)
		}
		batch := make([]*queuedTake, size)
		for i := range batch {
			items := []Item{{Key: scriptKeys[0], Limit: scriptLimits[0], Cost: 300}, {Key: scriptKeys[1], Limit: scriptLimits[1], Cost: 20}, {Key: scriptKeys[2], Limit: scriptLimits[2], Cost: 1}}[:n]
			k, a := r.takeArgs(id(), items, nil, true)
			batch[i] = &queuedTake{ctx: ctx, keys: k, args: a, done: make(chan struct{})}
		}
		if size == 1 && !r.takes.alone {
			q := batch[0]
			q.reply, q.err = r.takes.lone(ctx, q.keys, q.args)
		} else {
			r.takes.send(batch)
		}
		for _, q := range batch {
			if q.err != nil || len(q.reply) == 0 || q.reply[0] != 1 {
				tb.Fatalf("take: %v %v", q.reply, q.err)
			}
		}
	}
}
