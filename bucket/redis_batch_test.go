package bucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redisstats"
	"github.com/llmguard/llmguard/internal/redistest"
)

// batchTraffic is what the batch tests reconcile: n requests of tenant
// tenants[i % len] (user tokens and tenant USD in the tenant's slot, global
// requests in {global}), each taken, then reconciled (tokens and USD
// refunded in part, the requests unit's delta zero) or, every tenth,
// voided; and one request whose deltas are all zero.
type batchTraffic struct {
	items map[string][]bucket.Item
	batch []bucket.Reconciliation
}

var (
	batchTokens = bucket.Limit{Capacity: 1_000_000, Rate: 1000, Per: time.Second}
	batchUSD    = bucket.Limit{Capacity: 50_000_000, Rate: 1000, Per: time.Second}
	batchRPS    = bucket.Limit{Capacity: 100_000, Rate: 100, Per: time.Second}
)

func newBatchTraffic(n int, tenants []string) batchTraffic {
	tr := batchTraffic{items: map[string][]bucket.Item{}}
	for i := range n {
		id := fmt.Sprintf("req-%d", i)
		tenant := tenants[i%len(tenants)]
		items := []bucket.Item{
			{Key: "llmguard:{" + tenant + "}:user-tpm:alice", Limit: batchTokens, Cost: 700 + int64(i)},
			{Key: "llmguard:{" + tenant + "}:tenant-usd:" + tenant, Limit: batchUSD, Cost: 9000},
			{Key: "llmguard:{global}:global-rps", Limit: batchRPS, Cost: 1},
		}
		tr.items[id] = items
		if i%10 == 9 {
			tr.batch = append(tr.batch, bucket.Reconciliation{RequestID: id, Void: true, Deltas: []bucket.Delta{
				{Key: items[0].Key, Limit: batchTokens, Units: -items[0].Cost},
				{Key: items[1].Key, Limit: batchUSD, Units: -9000},
				{Key: items[2].Key, Limit: batchRPS, Units: -1},
			}})
			continue
		}
		tr.batch = append(tr.batch, bucket.Reconciliation{RequestID: id, Deltas: []bucket.Delta{
			{Key: items[0].Key, Limit: batchTokens, Units: -int64(i % 300)},
			{Key: items[1].Key, Limit: batchUSD, Units: 250 - 9000},
			{Key: items[2].Key, Limit: batchRPS, Units: 0},
		}})
	}
	tr.batch = append(tr.batch, bucket.Reconciliation{RequestID: "all-zero", Deltas: []bucket.Delta{
		{Key: "llmguard:{" + tenants[0] + "}:user-tpm:alice", Limit: batchTokens, Units: 0},
	}})
	return tr
}

// run takes every request's items from store, at cost, with its request id.
func (tr batchTraffic) run(t *testing.T, store bucket.Store) {
	t.Helper()
	ctx := context.Background()
	for i := range len(tr.items) {
		id := fmt.Sprintf("req-%d", i)
		if d, err := store.Take(ctx, id, tr.items[id]); err != nil || !d.Allowed {
			t.Fatalf("take %s: %+v, %v", id, d, err)
		}
	}
}

// statuses reads every bucket of the traffic at cost zero.
func (tr batchTraffic) statuses(t *testing.T, store bucket.Store) []bucket.Status {
	t.Helper()
	seen := map[string]bool{}
	var out []bucket.Status
	for i := range len(tr.items) {
		for _, it := range tr.items[fmt.Sprintf("req-%d", i)] {
			if seen[it.Key] {
				continue
			}
			seen[it.Key] = true
			d, err := store.Take(context.Background(), "", []bucket.Item{{Key: it.Key, Limit: it.Limit}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d.Buckets[0])
		}
	}
	return out
}

// TestRedisBatchOneScriptPerSlot applies a batch of 60 reconciliations and
// voids of three tenants' requests through ReconcileBatch, on one
// redis-server and on a Redis Cluster of three masters, and checks, from
// the client (a go-redis hook) and from the servers (INFO commandstats),
// that it is one round trip carrying one script per slot (one in all on
// one server), that each bucket is read once (one MGET a script) and
// written at most once, that each reconciliation sets one marker and each
// void reads and sets its take marker, that the deltas of zero units (the
// requests unit's, and a request with nothing else) send and record
// nothing; and that the buckets end as the memory store leaves them, the
// same calls applied one by one at the same instant.
func TestRedisBatchOneScriptPerSlot(t *testing.T) {
	const n = 60
	tenants := []string{"acme", "globex", "initech"}
	at := time.Now()
	now := func() time.Time { return at }
	tr := newBatchTraffic(n, tenants)

	mem := bucket.NewMemory(bucket.MemoryOptions{Now: now})
	t.Cleanup(func() { mem.Close() })
	tr.run(t, mem)
	for _, rc := range tr.batch {
		var err error
		if rc.Void {
			items := make([]bucket.Item, len(rc.Deltas))
			for i, d := range rc.Deltas {
				items[i] = bucket.Item{Key: d.Key, Limit: d.Limit, Cost: -d.Units}
			}
			err = mem.Void(context.Background(), rc.RequestID, items)
		} else {
			err = mem.Reconcile(context.Background(), rc.RequestID, rc.Deltas)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := tr.statuses(t, mem)

	check := func(t *testing.T, client redis.UniversalClient, nodes []redisstats.Node, slots, voidSlots int) {
		ctx := context.Background()
		counter := &tripCounter{commands: map[string]int{}}
		r := newRedis(t, bucket.RedisOptions{Client: client.(bucket.RedisScripter), Now: now})
		tr.run(t, r)
		client.AddHook(counter)
		before, err := redisstats.Read(ctx, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range r.ReconcileBatch(ctx, tr.batch) {
			if err != nil {
				t.Fatalf("element %d: %v", i, err)
			}
		}
		after, err := redisstats.Read(ctx, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		trips, cmds := counter.take()
		d := after.Sub(before)
		if trips != 1 || cmds["fcall"] != slots || len(cmds) != 1 {
			t.Errorf("%d round trips carrying %v; want 1 carrying %d fcall", trips, cmds, slots)
		}
		voids := n / 10
		calls := func(name string) int64 { return d.Commands[name].Calls }
		if calls("fcall") != int64(slots) || calls("mget") != int64(slots) || calls("get") != int64(voids*voidSlots) {
			t.Errorf("server: %d fcall, %d mget, %d get; want %d, %d, %d (%v)", calls("fcall"), calls("mget"), calls("get"), slots, slots, voids*voidSlots, d.Commands)
		}
		// A marker per reconciliation (in one slot: the zero delta of
		// {global} sends nothing), a tombstone per void and slot (each take
		// left a marker per slot), and at most one write per bucket.
		markers := int64(n-voids) + int64(voids*voidSlots)
		if w := calls("set") + calls("del"); w < markers || w > markers+int64(2*len(tenants)+1) {
			t.Errorf("server: %d SET and %d DEL; want %d markers and at most %d bucket writes", calls("set"), calls("del"), markers, 2*len(tenants)+1)
		}
		if got := tr.statuses(t, r); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("buckets after the batch\n\t%v\nmemory store\n\t%v", got, want)
		}
		if k := client.Keys(ctx, "*::rc:all-zero").Val(); len(k) != 0 {
			t.Errorf("the all-zero reconciliation left a marker: %v", k)
		}
	}
	t.Run("server", func(t *testing.T) {
		srv := redistest.Shared(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
		t.Cleanup(func() { c.Close() })
		check(t, c, []redisstats.Node{srv.Client()}, 1, 1)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.SharedCluster(t, 3)
		c := cl.Client()
		var nodes []redisstats.Node
		for _, s := range cl.Nodes {
			nodes = append(nodes, s.Client())
		}
		slots := map[int64]bool{}
		for _, tenant := range tenants {
			slots[c.ClusterKeySlot(context.Background(), "{"+tenant+"}").Val()] = true
		}
		slots[c.ClusterKeySlot(context.Background(), "{global}").Val()] = true // the voids' refunds of global-rps
		check(t, c, nodes, len(slots), 2)
	})
}
