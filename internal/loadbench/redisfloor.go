package loadbench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redisstats"
)

// BuildPing names the rows of a RedisWorkReport that measure the floor:
// one PING per "request" instead of an llmguard request, from the same
// number of clients, on the same Redis servers, in the same round. Its
// figures are what a single round trip costs Redis on this machine at that
// concurrency (reading the command, answering, the event loop and the
// system calls): no design that makes one Redis call per admitted request
// can cost less, so a row of llmguard reads best as a multiple of it.
const BuildPing = "PING"

// measurePingFloor sends up to o.Requests PINGs (or for o.Duration) from c
// goroutines, each on a connection of its own, spread over rt's servers
// in turn (a cluster's masters each get a share), between two readings of
// Redis, and returns the row: Admitted is the PINGs answered. Errors: a
// PING or a reading that fails.
func measurePingFloor(rt *redisWorkTarget, c int, o RedisWorkOptions) (RedisWorkRow, error) {
	row := RedisWorkRow{Store: rt.store, Build: BuildPing, Concurrency: c, Instructions: -1}
	ctx := context.Background()
	clients := make([]*redis.Client, len(rt.servers))
	for i, s := range rt.servers {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, PoolSize: c, MinIdleConns: c})
		defer clients[i].Close()
	}
	// Warm-up: every connection made before the first reading.
	if err := pings(ctx, clients, c, 4*c*len(clients), time.Minute, nil); err != nil {
		return row, err
	}
	if o.Callgrind {
		if err := zeroAll(rt.servers); err != nil {
			return row, err
		}
	}
	r0, err := redisstats.Read(ctx, rt.nodes...)
	if err != nil {
		return row, err
	}
	var done atomic.Int64
	start := time.Now()
	if err := pings(ctx, clients, c, o.Requests, o.Duration, &done); err != nil {
		return row, err
	}
	elapsed := time.Since(start)
	r1, err := redisstats.Read(ctx, rt.nodes...)
	if err != nil {
		return row, err
	}
	row.N, row.Admitted = int(done.Load()), done.Load()
	if o.Callgrind {
		n, err := instructionsOf(rt.servers)
		if err != nil {
			return row, err
		}
		row.Instructions = float64(n) / float64(max(row.Admitted, 1))
	}
	if elapsed > 0 {
		row.RPS = float64(row.N) / elapsed.Seconds()
	}
	row.Redis = r1.Sub(r0)
	row.Per = row.Redis.Per(row.Admitted)
	return row, nil
}

// pings runs c goroutines that PING the clients in turn until n PINGs were
// sent or limit passed, counting the answered ones in done (if not nil).
// Errors: the first PING that failed.
func pings(ctx context.Context, clients []*redis.Client, c, n int, limit time.Duration, done *atomic.Int64) error {
	var issued atomic.Int64
	deadline := time.Now().Add(limit)
	errs := make([]error, c)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for {
				i := issued.Add(1)
				if i > int64(n) || time.Now().After(deadline) {
					return
				}
				if err := clients[int(i)%len(clients)].Ping(ctx).Err(); err != nil {
					errs[w] = err
					return
				}
				if done != nil {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
