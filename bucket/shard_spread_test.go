package bucket_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// masterScriptCalls is the number of script calls (FCALL, EVALSHA and EVAL) each master
// of c has served, by address.
func masterScriptCalls(t *testing.T, c *redis.ClusterClient) map[string]int {
	t.Helper()
	calls := regexp.MustCompile(`cmdstat_(?:eval(?:sha)?|fcall):calls=(\d+)`)
	var mu sync.Mutex
	out := map[string]int{}
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n := 0
		for _, sub := range calls.FindAllStringSubmatch(info, -1) {
			v, _ := strconv.Atoi(sub[1])
			n += v
		}
		mu.Lock()
		out[m.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The takes of a hot global limit all land on one master of a Redis
// Cluster; split into 8 shards, they spread over the three masters in
// proportion to the shards each holds (the tags global:0 … global:7 hash to
// slots of the three masters 4, 2 and 2). Run with -v for the figures the
// README quotes.
func TestShardsSpreadOverMasters(t *testing.T) {
	cluster := redistest.SharedCluster(t, 3)
	c := cluster.Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	l := bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}
	const takes = 2000
	share := func(name string, item bucket.ShardedItem) []float64 {
		before := masterScriptCalls(t, c)
		for i := range takes {
			d, err := bucket.TakeSharded(context.Background(), r, "", []bucket.ShardedItem{item}, nil)
			if err != nil || !d.Allowed {
				t.Fatalf("%s take %d: %+v %v", name, i, d, err)
			}
		}
		after := masterScriptCalls(t, c)
		var shares []float64
		for _, n := range cluster.Nodes {
			shares = append(shares, float64(after[n.Addr()]-before[n.Addr()])/takes)
		}
		t.Logf("%s: share of %d takes per master: %.2f", name, takes, shares)
		return shares
	}
	one := share("1 shard", bucket.ShardedItem{Item: bucket.Item{Key: "llmguard:{global}:hot", Limit: l, Cost: 1}})
	eight := share("8 shards", bucket.ShardedItem{Item: bucket.Item{Limit: l, Cost: 1}, Shards: 8,
		Keys: bucket.ShardKeys{Prefix: "llmguard:{global:", Suffix: "}:hot"}})
	busiest := func(s []float64) (m float64) {
		for _, x := range s {
			m = max(m, x)
		}
		return m
	}
	if busiest(one) < 0.99 {
		t.Fatalf("unsharded: shares %v, want every take on one master", one)
	}
	for i, x := range eight {
		if x < 0.15 || x > 0.65 {
			t.Fatalf("8 shards: master %d served %.2f of the takes (%v), want each between 0.15 and 0.65", i, x, fmt.Sprint(eight))
		}
	}
}
