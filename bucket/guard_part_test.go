package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
)

// redisReply returns the error go-redis makes of a Redis error reply msg
// (a typed error for the cluster replies, as the Redis store sees them).
func redisReply(t *testing.T, msg string) error {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetError(msg)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer c.Close()
	err := c.Ping(context.Background()).Err()
	if err == nil || err.Error() != msg {
		t.Fatalf("reply %q read as %v", msg, err)
	}
	return err
}

// partStore is a BatchReconciler over a Memory in which the keys that start
// with "down:" fail with an error while one is set, as the keys of a Redis
// Cluster master that is down or failing over do while the other masters
// serve theirs. It counts per request id the reconciliations it applied.
type partStore struct {
	mem *bucket.Memory

	mu      sync.Mutex
	down    error
	applied map[string]int
}

func newPartStore() *partStore {
	frozen := time.Unix(1_700_000_000, 0)
	return &partStore{
		mem:     bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return frozen }, SweepEvery: -1}),
		applied: map[string]int{},
	}
}

func (p *partStore) setDown(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = err
}

func (p *partStore) appliedTo(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied[id]
}

func (p *partStore) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	return p.mem.Take(ctx, id, items)
}

func (p *partStore) Void(ctx context.Context, id string, items []bucket.Item) error {
	return p.mem.Void(ctx, id, items)
}

func (p *partStore) Reconcile(ctx context.Context, id string, d []bucket.Delta) error {
	return p.ReconcileBatch(ctx, []bucket.Reconciliation{{RequestID: id, Deltas: d}})[0]
}

func (p *partStore) ReconcileBatch(ctx context.Context, batch []bucket.Reconciliation) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(batch))
	for i, rc := range batch {
		if p.down != nil && strings.HasPrefix(rc.Deltas[0].Key, "down:") {
			errs[i] = &bucket.StoreError{Op: "reconcile", Subject: rc.RequestID, Err: p.down}
			continue
		}
		if errs[i] = p.mem.Reconcile(ctx, rc.RequestID, rc.Deltas); errs[i] == nil {
			p.applied[rc.RequestID]++
		}
	}
	return errs
}

// In a batch the store served, an element whose keys' part of the store
// could not serve it (a refused connection, a timeout, a cluster reply
// sent during a failover) fails with ErrUnavailable, so that it is held
// like a whole batch that failed; one the store refused keeps its own
// error. The breaker stays closed either way: the store answered.
func TestGuardedBatchPartlyUnavailable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"connection refused", errRefused, true},
		{"timeout", fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"cluster down", redisReply(t, "CLUSTERDOWN The cluster is down"), true},
		{"try again", redisReply(t, "TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"moved", redisReply(t, "MOVED 3999 127.0.0.1:6381"), true},
		{"loading", redisReply(t, "LOADING Redis is loading the dataset in memory"), true},
		{"master down", redisReply(t, "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"out of memory", redisReply(t, "OOM command not allowed when used memory > 'maxmemory'."), true},
		{"no replicas", redisReply(t, "NOREPLICAS Not enough good replicas to write."), true},
		{"busy", redisReply(t, "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), true},
		{"busy group", redisReply(t, "BUSYGROUP Consumer Group name already exists"), false},
		{"busy key", redisReply(t, "BUSYKEY Target key name already exists."), false},
		{"wrong type", redisReply(t, "WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"script error", redisReply(t, "ERR user_script:1: attempt to compare nil with number"), false},
	} {
		p := newPartStore()
		p.setDown(tc.err)
		g := bucket.NewGuarded(p, bucket.GuardOptions{MinCalls: 1, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
		errs := g.ReconcileBatch(ctx, []bucket.Reconciliation{
			{RequestID: "up", Deltas: []bucket.Delta{{Key: "up:k", Limit: guardLimit, Units: 1}}},
			{RequestID: "down", Deltas: []bucket.Delta{{Key: "down:k", Limit: guardLimit, Units: 1}}},
		})
		if errs[0] != nil || errs[1] == nil {
			t.Errorf("%s: errors %v, want nil and an error", tc.name, errs)
			continue
		}
		if got := errors.Is(errs[1], bucket.ErrUnavailable); got != tc.unavailable {
			t.Errorf("%s: %v wraps ErrUnavailable: %v, want %v", tc.name, errs[1], got, tc.unavailable)
		}
		if !errors.Is(errs[1], tc.err) {
			t.Errorf("%s: %v does not wrap the store's error", tc.name, errs[1])
		}
		if g.State() != bucket.BreakerClosed {
			t.Errorf("%s: breaker %v after a batch the store served", tc.name, g.State())
		}
	}
}

// A reconciliation whose keys live on a Redis Cluster master that is failing
// over, sent in batches with others that the live masters apply, is held
// through the failover whatever its attempts, and applied once when its
// keys are served again: never dropped.
func TestAsyncHoldsThroughPartialOutage(t *testing.T) {
	ctx := context.Background()
	p := newPartStore()
	p.setDown(redisReply(t, "CLUSTERDOWN The cluster is down"))
	g := bucket.NewGuarded(p, bucket.GuardOptions{MinCalls: 1000, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	// One attempt: a failure that is not held is dropped at once.
	a := bucket.NewAsyncReconciler(g, bucket.AsyncOptions{Attempts: 1, RetryEvery: time.Millisecond})
	defer a.Close()
	down := []bucket.Delta{{Key: "down:k", Limit: guardLimit, Units: 5}}
	up := []bucket.Delta{{Key: "up:k", Limit: guardLimit, Units: 1}}
	if err := a.Reconcile(ctx, "held", down); err != nil {
		t.Fatal(err)
	}
	// Live keys keep coming, so that the held one meets them in batches.
	for i := 0; a.Stats().Retried < 20; i++ {
		if i == 10000 {
			t.Fatalf("the reconciliation was not retried: %+v", a.Stats())
		}
		if err := a.Reconcile(ctx, fmt.Sprintf("up-%d", i), up); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.Dropped != 0 || st.Held != 1 {
		t.Fatalf("during the outage: %+v; want nothing dropped, one held", st)
	}
	p.setDown(nil)
	for deadline := time.Now().Add(10 * time.Second); a.Stats().Pending != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not applied 10 s after its keys were served again: %+v", a.Stats())
		}
	}
	if n := p.appliedTo("held"); n != 1 {
		t.Fatalf("the held reconciliation was applied %d times, want once", n)
	}
	if st := a.Stats(); st.Dropped != 0 {
		t.Fatalf("dropped %d: %+v", st.Dropped, st)
	}
}
