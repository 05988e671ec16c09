package bucket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// TestTakeBatchReplyForms: takebatch.lua replies a string of packed
// numbers (Redis's Lua; past 512 numbers packed in parts) or an array
// (miniredis), and splitNumbers reads either, a run's levels included. The
// same 120 takes (three token buckets each, costs that deny some: every
// kind of take reply) at one pinned instant, sent as one batch of 120 and
// as batches of 4 and 12, must get the same replies, take by take; so must
// 120 takes that all fail as too large (10 numbers each: 1,200 in one
// batch, packed in three parts on a redis-server, which the test checks).
func TestTakeBatchReplyForms(t *testing.T) {
	limits := []Limit{
		{Capacity: 5000, Rate: 10, Per: time.Second},
		{Capacity: 900, Rate: 1, Per: time.Second},
		{Capacity: 1e6, Rate: 1e6, Per: time.Second},
	}
	costs := func(i int) []int64 { return []int64{int64(37 * (i % 7)), int64(11 * (i % 5)), 1} }
	const takes = 120
	run := func(t *testing.T, c *redis.Client, size int) [][]int64 {
		return runReplyForms(t, c, limits, costs, takes, size)
	}
	check := func(t *testing.T, c *redis.Client) {
		want := run(t, c, takes)
		denied := 0
		for _, r := range want {
			if r[0] == 0 {
				denied++
			}
		}
		if denied == 0 || denied == takes {
			t.Fatalf("%d of %d takes denied: the case tells the replies' kinds apart no more", denied, takes)
		}
		for _, size := range []int{4, 12} {
			if got := run(t, c, size); !reflect.DeepEqual(got, want) {
				t.Errorf("batches of %d: replies %v, in one batch %v", size, got, want)
			}
		}
		tooLarge := func(i int) []int64 { return []int64{5001, int64(i), 1} }
		long := runReplyForms(t, c, limits, tooLarge, takes, takes)
		for i, r := range long {
			if len(r) != 10 || r[0] != 0 || r[2] != 1 {
				t.Fatalf("take %d of all too large: reply %v", i, r)
			}
		}
		if got := runReplyForms(t, c, limits, tooLarge, takes, 4); !reflect.DeepEqual(got, long) {
			t.Errorf("all too large, batches of 4: replies %v, in one batch %v", got, long)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		check(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		check(t, c)
		// The long batch's reply: packed, in parts (its run's 3 and three
		// levels, then 1,200 numbers).
		r, err := NewRedis(RedisOptions{Client: c, TakeBatch: takes})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		batch := make([]*queuedTake, takes)
		for i := range batch {
			items := make([]Item, len(limits))
			for j := range items {
				items[j] = Item{Key: fmt.Sprintf("llmguard:{t}:b%d", j), Limit: limits[j], Cost: 5001}
			}
			k, a := r.takeArgs(NewRequestID(time.Now()), items, nil, true)
			batch[i] = &queuedTake{ctx: ctx, keys: k, args: a}
		}
		keys, args := batchArgs(batch)
		nums, err := replyNumbers(r.call(ctx, r.takeBatch, keys, args...))
		if err != nil || nums.f == nil || len(nums.f) != 4+10*takes {
			t.Fatalf("a batch of %d too large takes: reply packed %v, %d numbers, %v; want packed, %d", takes, nums.f != nil, nums.len(), err, 4+10*takes)
		}
	})
}

// runReplyForms runs takes takes over limits' three buckets (their costs
// costs(i)) at one pinned instant on c, flushed first, in batches of size
// through the store's send, and returns each take's reply.
func runReplyForms(t *testing.T, c *redis.Client, limits []Limit, costs func(int) []int64, takes, size int) [][]int64 {
	t.Helper()
	ctx := context.Background()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }, TakeBatch: takes})
	if err != nil {
		t.Fatal(err)
	}
	var replies [][]int64
	for from := 0; from < takes; from += size {
		batch := make([]*queuedTake, size)
		for i := range batch {
			n := from + i
			items := make([]Item, len(limits))
			for j, cost := range costs(n) {
				items[j] = Item{Key: fmt.Sprintf("llmguard:{t}:b%d", j), Limit: limits[j], Cost: cost}
			}
			k, a := r.takeArgs(NewRequestID(now), items, nil, true)
			batch[i] = &queuedTake{ctx: ctx, keys: k, args: a, done: make(chan struct{})}
		}
		r.takes.send(batch)
		for i, q := range batch {
			if q.err != nil {
				t.Fatalf("batches of %d, take %d: %v", size, from+i, q.err)
			}
			replies = append(replies, q.reply)
		}
	}
	return replies
}

// TestBatchReply: batchReply reads a packed string (each 8 bytes a
// little-endian double, cast toward zero as Redis casts a reply number)
// and an array alike, and refuses a string of a length not a multiple of
// 8 and a reply of another type with errTakeReply.
func TestBatchReply(t *testing.T) {
	nums := []float64{1, -1, 0, 42, 1 << 53, -(1 << 62), math.MaxInt64 - 1023, math.MinInt64}
	var packed []byte
	want := make([]int64, len(nums))
	for i, f := range nums {
		packed = binary.LittleEndian.AppendUint64(packed, math.Float64bits(f))
		want[i] = int64(f)
	}
	cmd := func(v any) *redis.Cmd {
		c := redis.NewCmd(context.Background())
		c.SetVal(v)
		return c
	}
	if got, err := batchReply(cmd(string(packed))); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("packed: %v %v, want %v", got, err, want)
	}
	arr := make([]any, len(want))
	for i, v := range want {
		arr[i] = v
	}
	if got, err := batchReply(cmd(arr)); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("array: %v %v, want %v", got, err, want)
	}
	if got, err := batchReply(cmd("")); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	for _, bad := range []any{string(packed[:13]), int64(3)} {
		if got, err := batchReply(cmd(bad)); !errors.Is(err, errTakeReply) {
			t.Errorf("%T of %v: %v %v, want errTakeReply", bad, bad, got, err)
		}
	}
}

// FuzzBatchReply: any string is read as len/8 numbers, each int64 of its
// 8 bytes' little-endian double, or refused with errTakeReply when its
// length is not a multiple of 8; it never panics.
//
//	go test -run XXX -fuzz '^FuzzBatchReply$' -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzBatchReply(f *testing.F) {
	f.Add("")
	f.Add("\x00\x00\x00\x00\x00\x00\xf0\x3f")
	f.Add("\x00\x00\x00\x00\x00\x00\xf0\x3f\x01")
	f.Fuzz(func(t *testing.T, s string) {
		c := redis.NewCmd(context.Background())
		c.SetVal(s)
		got, err := batchReply(c)
		if len(s)%8 != 0 {
			if !errors.Is(err, errTakeReply) {
				t.Fatalf("%d bytes: %v %v", len(s), got, err)
			}
			return
		}
		if err != nil || len(got) != len(s)/8 {
			t.Fatalf("%d bytes: %d numbers, %v", len(s), len(got), err)
		}
		for i, v := range got {
			if want := int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8*i:])))); v != want {
				t.Fatalf("number %d: %d, want %d", i, v, want)
			}
		}
	})
}

// batchReply returns a reply of takebatch.lua as integers (replyNumbers,
// each packed double cast toward zero), the whole reply flat: the tests'
// view of it (splitNumbers reads the numbers in production). Errors:
// replyNumbers's.
func batchReply(cmd *redis.Cmd) ([]int64, error) {
	n, err := replyNumbers(cmd)
	if err != nil || n.f == nil {
		return n.i, err
	}
	flat := make([]int64, len(n.f))
	for i := range flat {
		flat[i] = n.at(i)
	}
	return flat, nil
}
