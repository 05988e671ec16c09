package bucket_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestAsyncHoldsThroughARefusingMaster runs reconciliations through the
// AsyncReconciler, the guard and the Redis store on a real three-master
// Redis Cluster, one of whose masters refuses every write for a while:
// at its maxmemory with noeviction (OOM), short of its
// min-replicas-to-write (NOREPLICAS), or running a script past
// busy-reply-threshold (BUSY). The other masters go on applying their
// reconciliations, in the same batches. The refused master's
// reconciliation must be held, as one of a master that is down, and not
// spend its attempts: the reconciler here has one, so a failure counted as
// an attempt drops it at once. Once the master writes again it is applied,
// once. adv42: before, the three replies to one slot group of a batch the
// store otherwise served counted as the store refusing the delta for good:
// dropped (DroppedBy "attempts") after the app's five attempts, the bucket
// left as the take left it.
func TestAsyncHoldsThroughARefusingMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	client := cl.Client()
	ctx := context.Background()
	full, served := "llmguard:{acme}:tok:kim", ""
	for i := 0; served == ""; i++ {
		k := fmt.Sprintf("llmguard:{t%d}:tok:kim", i)
		if cl.MasterOf(k) != cl.MasterOf(full) {
			served = k
		}
	}
	node := cl.MasterOf(full)
	master := node.Client()
	configs := func(kv ...string) func(t *testing.T) {
		return func(t *testing.T) {
			for i := 0; i < len(kv); i += 2 {
				if err := master.ConfigSet(ctx, kv[i], kv[i+1]).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name        string
		refuse, end func(t *testing.T)
	}{
		{"oom", configs("maxmemory-policy", "noeviction", "maxmemory", "1"), configs("maxmemory", "0")},
		{"noreplicas", configs("min-replicas-max-lag", "10", "min-replicas-to-write", "1"), configs("min-replicas-to-write", "0")},
		{"busy", func(t *testing.T) {
			configs("busy-reply-threshold", "10")(t)
			// A script that runs until SCRIPT KILL, on a connection of its
			// own that waits for it; the master answers BUSY meanwhile.
			loop := redis.NewClient(&redis.Options{Addr: node.Addr(), ReadTimeout: -1, MaxRetries: -1})
			t.Cleanup(func() { loop.Close() })
			go loop.Eval(ctx, "while true do end", nil)
			probe := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
			defer probe.Close()
			for i := 0; ; i++ {
				err := probe.Ping(ctx).Err()
				if err != nil && strings.HasPrefix(err.Error(), "BUSY ") {
					return
				}
				if i == 1000 {
					t.Fatalf("the master never answered BUSY: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}, func(t *testing.T) {
			killer := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
			defer killer.Close()
			if err := killer.ScriptKill(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for i := 0; killer.Ping(ctx).Err() != nil; i++ { // the script stops at its next check
				if i == 1000 {
					t.Fatal("the master still busy after SCRIPT KILL")
				}
				time.Sleep(time.Millisecond)
			}
			configs("busy-reply-threshold", "5000")(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRedis(t, bucket.RedisOptions{Client: client, Cluster: true})
			g := bucket.NewGuarded(r, bucket.GuardOptions{Timeout: time.Second, ReconcileTimeout: time.Second})
			a := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{Attempts: 1, RetryEvery: 5 * time.Millisecond})
			defer a.Close()
			key := full + ":" + tc.name
			if _, err := r.Take(ctx, "take-"+tc.name, []bucket.Item{{Key: key, Limit: guardLimit, Cost: 10}}); err != nil {
				t.Fatal(err)
			}
			tc.refuse(t)
			ended := false
			end := func() {
				if !ended {
					ended = true
					tc.end(t)
				}
			}
			defer end()
			held := []bucket.Delta{{Key: key, Limit: guardLimit, Units: 5}}
			up := []bucket.Delta{{Key: served, Limit: guardLimit, Units: -1}}
			// The held reconciliation and one of the served master, in one
			// batch; then more of the served master, each batch with the
			// held one's retry when it is due, until it has been retried
			// 20 times (a count, not a time).
			if err := a.Reconcile(ctx, "held-"+tc.name, held); err != nil {
				t.Fatal(err)
			}
			for i := 0; a.Stats().Retried < 20 && a.Stats().Dropped == 0; i++ {
				if i == 100000 {
					t.Fatalf("the reconciliation was not retried: %+v", a.Stats())
				}
				if err := a.Reconcile(ctx, fmt.Sprintf("up-%s-%d", tc.name, i), up); err != nil {
					t.Fatal(err)
				}
				if i%10 == 0 {
					if err := a.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := a.Stats()
			if st.Dropped != 0 || st.Held != 1 {
				t.Fatalf("while the master refuses writes (%s): %+v; want nothing dropped, one held", tc.name, st)
			}
			end()
			for i := 0; a.Stats().Pending != 0; i++ {
				if i == 10000 {
					t.Fatalf("not applied once the master writes again: %+v", a.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: guardLimit}})
			if err != nil {
				t.Fatal(err)
			}
			// guardLimit: 100 units, 1 an hour: the take's 10 and the
			// reconciliation's 5, once (the refill of the test's seconds
			// is below a unit).
			if got := d.Buckets[0].Remaining; got != 85 {
				t.Errorf("bucket holds %d after a take of 10 and a reconciliation of +5, want 85", got)
			}
			if st := a.Stats(); st.Dropped != 0 {
				t.Errorf("dropped: %+v", st)
			}
		})
	}
}
