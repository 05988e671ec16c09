package bucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkCallArgs builds the KEYS and ARGV of one script call in the
// store's layouts, the Go side's work per call: a reconcile.lua call of 1
// and of 32 reconciliations (two deltas and an id of NewRequestID's form
// each, as TestCallgrindScripts sends them; 1 is a lone Reconcile, as an
// AsyncReconciler at concurrency 1 mostly sends, in the lone layout), and a takebatch.lua call
// of 2 and of 32 takes of three token buckets. Its allocations are the
// figure to watch (b.ReportAllocs).
func BenchmarkCallArgs(b *testing.B) {
	r, err := NewRedis(RedisOptions{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})})
	if err != nil {
		b.Fatal(err)
	}
	limits := []Limit{{Capacity: 1e9, Rate: 1e9, Per: time.Second}, {Capacity: 1e6, Rate: 1e6, Per: time.Second}, {Capacity: 1e6, Rate: 1e6, Per: time.Second}}
	keys := []string{"llmguard:{t}:user:alice", "llmguard:{t}:tenant:acme", "llmguard:{t}:global"}
	for _, size := range []int{1, 32} {
		batch := make([]Reconciliation, size)
		for i := range batch {
			batch[i] = Reconciliation{RequestID: NewRequestID(t0), Deltas: []Delta{
				{Key: keys[0], Limit: limits[0], Units: -100},
				{Key: keys[1], Limit: limits[1], Units: 3}}}
		}
		b.Run(fmt.Sprintf("reconcile-%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := r.newReconcileCall()
				for j, rc := range batch {
					c.add(j, rc.RequestID, rc.Deltas, nil, modeReconcile)
				}
				_, _ = c.callArgs(r)
			}
		})
	}
	for _, size := range []int{2, 32} {
		takes := make([]*queuedTake, size)
		for i := range takes {
			items := []Item{{Key: keys[0], Limit: limits[0], Cost: 300}, {Key: keys[1], Limit: limits[1], Cost: 20}, {Key: keys[2], Limit: limits[2], Cost: 1}}
			k, a := r.takeArgs(NewRequestID(t0), items, nil, true)
			takes[i] = &queuedTake{ctx: context.Background(), keys: k, args: a}
		}
		b.Run(fmt.Sprintf("takebatch-%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = batchArgs(takes)
			}
		})
	}
}
