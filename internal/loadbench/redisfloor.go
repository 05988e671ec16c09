package loadbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redisstats"
)

// The builds of the rows of a RedisWorkReport that measure floors: calls
// that are not llmguard requests, sent one per "request" from the same
// number of clients, on the same Redis servers, in the same round, so that
// a row of llmguard reads best as a multiple of them.
const (
	// BuildPing is one PING per request: what a single round trip costs
	// Redis on this machine at that concurrency (reading the command,
	// answering, the event loop and the system calls). No design that
	// makes one Redis call per admitted request can cost less.
	BuildPing = "PING"
	// BuildFcall is one FCALL per request of a function that does nothing
	// but return a lone take's allowed reply (three buckets' levels,
	// packed by struct.pack: 24 bytes), sent a lone take's KEYS and ARGV (a marker
	// key of its own, three bucket keys, the shape's text and the three
	// costs packed, 24 bytes; lua/take.lua's lone layout): what calling a
	// script with those arguments costs before it runs anything. Measured
	// on one Redis only (StoreRedis).
	BuildFcall = "FCALL"
	// BuildFcallCommands is BuildFcall's call of a function that also runs
	// a lone take's six commands (TIME, MGET of the four keys, a PSETEX of
	// the marker and of each bucket) with none of its arithmetic: the
	// floor of a lone take as Redis stores buckets now. One Redis only.
	BuildFcallCommands = "FCALL+6"
)

// floorLibrary is the Redis Functions library of BuildFcall's and
// BuildFcallCommands's functions. The values and TTLs are like the lone
// take's: a whole level and a µs instant, the marker's 10 s void window, a
// bucket's TTL of about a minute.
const floorLibrary = `#!lua name=llmguard_floor
local reply
local function packed()
  if not reply then
    reply = struct.pack('<ddd', 1000000, 5000000, 100000)
  end
  return reply
end
redis.register_function('llmguard_floor_call', function(keys, args)
  return packed()
end)
redis.register_function('llmguard_floor_commands', function(keys, args)
  redis.call('TIME')
  redis.call('MGET', unpack(keys))
  redis.call('PSETEX', keys[1], '10000', 't')
  for i = 2, #keys do
    redis.call('PSETEX', keys[i], '61000', '123456 1764777600123456')
  end
  return packed()
end)
`

// floorProbe is one kind of floor row: its build name, the call it sends
// per request (i counts the calls, from 1, for keys of their own) and
// whether it runs on a cluster too.
type floorProbe struct {
	build   string
	call    func(ctx context.Context, c *redis.Client, i int64) error
	cluster bool
}

// floorProbes are the floors in the order RunRedisWork measures them.
var floorProbes = []floorProbe{
	{build: BuildPing, cluster: true, call: func(ctx context.Context, c *redis.Client, _ int64) error {
		return c.Ping(ctx).Err()
	}},
	{build: BuildFcall, call: func(ctx context.Context, c *redis.Client, i int64) error {
		return fcallFloor(ctx, c, "llmguard_floor_call", i)
	}},
	{build: BuildFcallCommands, call: func(ctx context.Context, c *redis.Client, i int64) error {
		return fcallFloor(ctx, c, "llmguard_floor_commands", i)
	}},
}

// floorCosts is a lone take's three costs (1024, 1850 and 1 units) as
// bucket's loneArgs packs them: 8 bytes each, the little-endian IEEE 754
// double.
const floorCosts = "\x00\x00\x00\x00\x00\x00\x90\x40" + "\x00\x00\x00\x00\x00\xe8\x9c\x40" + "\x00\x00\x00\x00\x00\x00\xf0\x3f"

// fcallFloor sends the FCALL of function with a lone take's KEYS and ARGV,
// the marker key made from i. Errors: the call's, or a reply that is not
// the three levels packed.
func fcallFloor(ctx context.Context, c *redis.Client, function string, i int64) error {
	keys := []string{
		fmt.Sprintf("llmguard:{floor-team}::tk:%024x", i),
		"llmguard:{floor-team}:user-tokens:floor-user",
		"llmguard:{floor-team}:team-usd:floor-team",
		"llmguard:{floor-team}:global-requests:*",
	}
	r, err := c.FCall(ctx, function, keys, "L 10000 1000000 1000000 3600000000 5000000 5000000 86400000000 100000 100000 60000000", floorCosts).Result()
	if err != nil {
		return fmt.Errorf("loadbench: %s: %w", function, err)
	}
	if v, ok := r.(string); !ok || len(v) != 24 {
		return fmt.Errorf("loadbench: %s answered %v", function, r)
	}
	return nil
}

// measureFloor sends up to o.Requests of p's calls (or for o.Duration)
// from c goroutines, each on a connection of its own, spread over rt's
// servers in turn (a cluster's masters each get a share), between two
// readings of Redis, and returns the row: Admitted is the calls answered.
// With rate > 0 (calls per second, all goroutines together) the calls are
// paced at it: call i is sent no sooner than i/rate seconds after the
// first; else they go back to back. It loads floorLibrary first when p is
// not BuildPing. Errors: a call, the library's load or a reading that
// fails.
func measureFloor(rt *redisWorkTarget, c int, o RedisWorkOptions, p floorProbe, rate float64) (RedisWorkRow, error) {
	row := RedisWorkRow{Store: rt.store, Build: p.build, Concurrency: c, Instructions: -1}
	ctx := context.Background()
	clients := make([]*redis.Client, len(rt.servers))
	for i, s := range rt.servers {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, PoolSize: c, MinIdleConns: c})
		defer clients[i].Close()
		if p.build != BuildPing {
			if err := clients[i].FunctionLoadReplace(ctx, floorLibrary).Err(); err != nil {
				return row, fmt.Errorf("loadbench: loading the floor's functions: %w", err)
			}
		}
	}
	// Warm-up: every connection made before the first reading.
	if err := probes(ctx, clients, c, 4*c*len(clients), time.Minute, p, 0, nil); err != nil {
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
	if err := probes(ctx, clients, c, o.Requests, o.Duration, p, rate, &done); err != nil {
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

// floorSeq numbers the floors' calls over the whole process, so that every
// FCALL's marker key is new (as a request id's is).
var floorSeq atomic.Int64

// probes runs c goroutines that send p's call to the clients in turn until
// n calls were sent or limit passed, counting the answered ones in done
// (if not nil); with rate > 0 (calls per second) call i waits until i/rate
// seconds after the start. Errors: the first call that failed.
func probes(ctx context.Context, clients []*redis.Client, c, n int, limit time.Duration, p floorProbe, rate float64, done *atomic.Int64) error {
	var issued atomic.Int64
	start := time.Now()
	deadline := start.Add(limit)
	errs := make([]error, c)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for {
				i := issued.Add(1)
				if i > int64(n) || time.Now().After(deadline) {
					return
				}
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i-1) / rate * float64(time.Second)))))
				}
				if err := p.call(ctx, clients[int(i)%len(clients)], floorSeq.Add(1)); err != nil {
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
