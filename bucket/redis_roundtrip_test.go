package bucket_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// tripCounter is a go-redis hook counting round trips (a command or a
// pipeline sent and its replies read) and the commands they carried, by
// name.
type tripCounter struct {
	mu       sync.Mutex
	trips    int
	commands map[string]int
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(cmds...)
		return next(ctx, cmds)
	}
}

func (c *tripCounter) count(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips++
	for _, cmd := range cmds {
		c.commands[strings.ToLower(cmd.Name())]++
	}
}

// take returns the round trips and commands counted since the last call.
func (c *tripCounter) take() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	trips, cmds := c.trips, c.commands
	c.trips, c.commands = 0, map[string]int{}
	return trips, cmds
}

// scriptCalls is the script calls a redis-server has served, read from
// INFO commandstats: byName those that name a loaded script (FCALL of a
// library function, or EVALSHA), eval those that send it whole (EVAL).
// Commands the scripts run inside are counted under their own names and
// not included.
func scriptCalls(t *testing.T, admin *redis.Client) (byName, eval int) {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		for _, line := range strings.Split(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			return n
		}
		return 0
	}
	return calls("fcall") + calls("evalsha"), calls("eval")
}

// TestRedisOneRoundTripPerAdmission checks, on a real redis-server behind
// the Guarded wrapper production uses, that an admission (a Take of a
// request's buckets: token buckets and a quota, with the request id's take
// marker) is one round trip carrying one FCALL, whether it admits or
// denies, and that its reconciliation is one more; counted both by the
// client (a go-redis hook) and by the server (INFO commandstats).
func TestRedisOneRoundTripPerAdmission(t *testing.T) {
	srv := redistest.Shared(t)
	counter := &tripCounter{commands: map[string]int{}}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	t.Cleanup(func() { client.Close() })
	admin := srv.Client()
	r := newRedis(t, bucket.RedisOptions{Client: client})
	// Generous deadlines: this test counts calls, it does not time them.
	store := bucket.NewGuarded(r, bucket.GuardOptions{Timeout: 10 * time.Second, ReconcileTimeout: 10 * time.Second})
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil { // the connection is made before counting
		t.Fatal(err)
	}
	client.AddHook(counter)

	rate := bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Minute}
	month := time.Now().UTC().AddDate(0, 0, -1)
	quota := bucket.Quota(1_000_000, month, month.AddDate(0, 2, 0))
	items := []bucket.Item{
		{Key: "llmguard:{t1}:tpm:user-alice", Limit: rate, Cost: 600},
		{Key: "llmguard:{t1}:tpm:tenant", Limit: rate, Cost: 600},
		{Key: "llmguard:{global}:rpm", Limit: rate, Cost: 1},
		{Key: "llmguard:{t1}:usd:tenant", Limit: quota, Cost: 5000},
	}
	step := func(name string, do func() error, wantFcall int) {
		t.Helper()
		sha0, eval0 := scriptCalls(t, admin)
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		trips, cmds := counter.take()
		sha1, eval1 := scriptCalls(t, admin)
		if trips != 1 || len(cmds) != 1 || cmds["fcall"] != wantFcall {
			t.Errorf("%s: %d round trips carrying %v; want 1 carrying %d fcall", name, trips, cmds, wantFcall)
		}
		if sha1-sha0 != wantFcall || eval1 != eval0 {
			t.Errorf("%s: the server ran %d FCALL or EVALSHA and %d EVAL; want %d and 0", name, sha1-sha0, eval1-eval0, wantFcall)
		}
	}
	step("admitted take", func() error {
		d, err := store.Take(ctx, "req-1", items)
		if err == nil && !d.Allowed {
			t.Errorf("first take denied: %+v", d)
		}
		return err
	}, 1)
	step("reconciliation", func() error {
		return store.Reconcile(ctx, "req-1", []bucket.Delta{
			{Key: items[0].Key, Limit: rate, Units: -100}, {Key: items[1].Key, Limit: rate, Units: -100},
			{Key: items[3].Key, Limit: quota, Units: 250},
		})
	}, 1)
	step("denied take", func() error {
		d, err := store.Take(ctx, "req-2", items)
		if err == nil && d.Allowed {
			t.Errorf("second take of 600 from 500 left admitted: %+v", d)
		}
		return err
	}, 1)
}
