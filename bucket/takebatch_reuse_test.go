package bucket

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// functionsMemory is Redis's used_memory_vm_functions (INFO memory): the
// bytes of the Lua VM that runs the Functions library, garbage not yet
// collected included.
func functionsMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory_vm_functions:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no used_memory_vm_functions: Redis before 7.0")
	return 0
}

// TestTakeBatchKeepsNoKeysOfEarlierCalls: takebatch.lua keeps its tables
// from call to call in the library (state, the shapes…), so each call must
// empty what the last one left, not only what changes a reply
// (TestTakeBatchLayoutMatchesOld holds the replies and keys): a key only
// read (a take denied: no write empties it) and the marker key a take run
// by takeOne names from its id ("llmguard:{t}::tk:<id>", not among KEYS);
// and it keeps at most cellMax cells of written keys.
// Each case runs batches of takes, each take on a bucket or with an id no
// other take has: 600 batches of 8 on buckets whose names are 2 KB long,
// 9.6 MB of names; 2,000 batches of 32 ids, 64,000 marker keys of 50
// bytes, some 6 MB with a table's nodes. A table keeping them would hold
// that, against a Lua VM of well under 4 MB that keeps none (its garbage
// included; the library itself is some 0.2 MB).
func TestTakeBatchKeepsNoKeysOfEarlierCalls(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	r, err := NewRedis(RedisOptions{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 2048)
	day := time.Now().UTC().Truncate(24 * time.Hour)
	quota := Limit{Capacity: 1 << 40, WindowStart: day, WindowEnd: day.Add(24 * time.Hour)}
	tokens := Limit{Capacity: 10, Rate: 10, Per: time.Second}
	cases := []struct {
		name          string
		size, batches int
		items         func(i int) (string, []Item)
	}{
		// Denied (too large): the take writes nothing, its key is only read.
		{"denied takes' keys", 8, 600, func(i int) (string, []Item) {
			return "", []Item{{Key: "llmguard:{t}:user:" + pad + strconv.Itoa(i), Limit: tokens, Cost: 11}}
		}},
		// Admitted: each key gets a cell, kept from call to call up to
		// cellMax (1,024: some 2 MB of these names).
		{"written keys' cells", 8, 600, func(i int) (string, []Item) {
			return "", []Item{{Key: "llmguard:{t}:user:" + pad + strconv.Itoa(i), Limit: tokens, Cost: 1}}
		}},
		// A quota runs takeOne, which names the marker key of its id.
		{"takeOne's marker keys", 32, 2000, func(i int) (string, []Item) {
			return NewRequestID(time.Now()), []Item{{Key: "llmguard:{t}:tenant:q", Limit: quota, Cost: 1}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(from, batches int) {
				for b := range batches {
					batch := make([]*queuedTake, tc.size)
					for j := range batch {
						id, items := tc.items(from + tc.size*b + j)
						k, a := r.takeArgs(id, items, nil, true)
						batch[j] = &queuedTake{ctx: ctx, keys: k, args: a, done: make(chan struct{})}
					}
					r.takes.send(batch)
					for _, q := range batch {
						if q.err != nil || len(q.reply) == 0 {
							t.Fatalf("take: %v %v", q.reply, q.err)
						}
					}
				}
			}
			run(0, 50)
			before := functionsMemory(t, c)
			run(50*tc.size, tc.batches)
			after := functionsMemory(t, c)
			t.Logf("used_memory_vm_functions %d → %d bytes", before, after)
			if after-before > 4<<20 {
				t.Errorf("the library's Lua VM grew by %d bytes over %d batches of new keys: a table keeps them", after-before, tc.batches)
			}
		})
	}
}
