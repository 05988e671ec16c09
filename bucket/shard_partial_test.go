package bucket_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// shardsDown is a Store over a memory store whose keys holding one of down
// live on masters that are down: a take made with bucket.WithPartial is
// served for the other keys and answered with a *bucket.PartialError, as
// bucket.Redis answers it; without the mark, or with nothing served, it
// fails whole. Voids of live keys pass through.
type shardsDown struct {
	bucket.Store
	down []string
}

var errShardDown = errors.New("injected: master down")

func (s *shardsDown) isDown(key string) bool {
	return slices.ContainsFunc(s.down, func(d string) bool { return strings.Contains(key, d) })
}

func (s *shardsDown) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	var failed, at []int
	var served []bucket.Item
	for i, it := range items {
		if s.isDown(it.Key) {
			failed = append(failed, i)
		} else {
			served, at = append(served, it), append(at, i)
		}
	}
	if failed == nil {
		return s.Store.Take(ctx, id, items)
	}
	if !bucket.PartialAllowed(ctx) || served == nil {
		return bucket.Decision{}, errShardDown
	}
	sd, err := s.Store.Take(ctx, id, served)
	if err != nil {
		return sd, err
	}
	d := bucket.Decision{Allowed: sd.Allowed, DeniedBy: -1, Buckets: make([]bucket.Status, len(items))}
	if !sd.Allowed {
		d.DeniedBy = at[sd.DeniedBy]
	}
	for j, st := range sd.Buckets {
		d.Buckets[at[j]] = st
	}
	return d, &bucket.PartialError{Failed: failed, Err: errShardDown}
}

// TakeSharded with WithPartial over shards some of whose masters are down:
// an item of two shards a try (cost 150 over shards of 100) moves to the
// next window when one of its shards fails, then to the shards that held
// enough (gather) when the next window fails too, and fails alone when
// every shard failed; each failed try's served part is given back, so the
// unsharded bucket is charged once.
func TestTakeShardedMovesPastFailedShards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		down   []string
		levels []int64 // the shards' levels after the take
		failed bool    // the sharded item failed
	}{
		{"next window", []string{"{s1}"}, []int64{100, 100, 25, 25}, false},
		{"gathered from the live shards", []string{"{s1}", "{s3}"}, []int64{0, 100, 50, 100}, false},
		{"every shard down", []string{"{s"}, []int64{100, 100, 100, 100}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
			t.Cleanup(func() { mem.Close() })
			store := &shardsDown{Store: mem, down: tc.down}
			lim := bucket.Limit{Capacity: 400, Rate: 4, Per: 24 * time.Hour}
			ulim := bucket.Limit{Capacity: 1000, Rate: 1, Per: 24 * time.Hour}
			keys := bucket.ShardKeys{Prefix: "llmguard:{s", Suffix: "}:g"}
			items := []bucket.ShardedItem{
				{Item: bucket.Item{Key: "llmguard:{u}:t", Limit: ulim, Cost: 150}},
				{Item: bucket.Item{Key: "llmguard:{g}:g", Limit: lim, Cost: 150}, Shards: 4, Keys: keys},
			}
			d, err := bucket.TakeSharded(bucket.WithPartial(context.Background()), store, "req", items, func(int) int { return 0 })
			pe := bucket.AsPartial(err)
			switch {
			case tc.failed && (pe == nil || !slices.Equal(pe.Failed, []int{1}) || !d.Allowed || d.Taken[1] != nil):
				t.Fatalf("take: %+v, %v; want allowed with item 1 failed", d, err)
			case !tc.failed && (err != nil || !d.Allowed):
				t.Fatalf("take: %+v, %v; want allowed", d, err)
			}
			ud, err := mem.Take(context.Background(), "", []bucket.Item{{Key: "llmguard:{u}:t", Limit: ulim}})
			if err != nil {
				t.Fatal(err)
			}
			if got := ud.Buckets[0].Remaining; got != 1000-150 {
				t.Fatalf("the unsharded bucket holds %d, want 1000 − 150: each failed try given back, charged once", got)
			}
			for i, want := range tc.levels {
				sd, err := mem.Take(context.Background(), "", []bucket.Item{{Key: keys.Key(i), Limit: bucket.ShardLimit(lim, 4, i)}})
				if err != nil {
					t.Fatal(err)
				}
				if got := sd.Buckets[0].Remaining; got != want {
					t.Fatalf("shard %d holds %d, want %d (tries %d)", i, got, want, d.Tries)
				}
			}
		})
	}
}
