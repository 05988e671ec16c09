package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// replyLoser passes every call to its Store, and loses the reply of the
// next lose Reconciles: applied by Redis, reported as timed out.
type replyLoser struct {
	bucket.Store
	mu   sync.Mutex
	lose int
	ids  []string
}

func (l *replyLoser) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	lose := l.lose > 0
	if lose {
		l.lose--
	}
	l.mu.Unlock()
	if err := l.Store.Reconcile(ctx, id, deltas); err != nil {
		return err
	}
	if lose {
		return fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
	}
	return nil
}

// TestChargeBackRedisKilledAndRestarted charges a quota in a real
// redis-server with what a fallback admitted while the server was dead:
// held while it is down, applied once it is back (Redis restarted empty:
// its use is exactly the fallback's spend), exactly once when the charge
// is replayed twice after lost replies; a charge whose period ended on the
// node's clock is dropped and counted, and one whose period the store has
// moved past applies to nothing there.
func TestChargeBackRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	r, err := bucket.NewRedis(bucket.RedisOptions{Client: guardClient(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	lossy := &replyLoser{Store: r}
	// MinCalls high: the breaker stays closed, every call reaches the
	// server (a dead one refuses it).
	g := bucket.NewGuarded(lossy, bucket.GuardOptions{Timeout: time.Second, ReconcileTimeout: time.Second, MinCalls: 1 << 20})
	var clockMu sync.Mutex
	nodeNow := time.Now()
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return nodeNow }
	cb, err := bucket.NewChargeBack(bucket.ChargeOptions{Store: g, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := now().Add(-time.Hour).Truncate(time.Second)
	q := bucket.Quota(100, start, start.Add(2*time.Hour))
	used := func(step, key string, l bucket.Limit) int64 {
		t.Helper()
		d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: l}})
		if err != nil {
			t.Fatalf("%s: reading %s: %v", step, key, err)
		}
		return l.Capacity - d.Buckets[0].Remaining
	}
	flushUntil := func(step string) {
		t.Helper()
		var err error
		for range 200 { // go-redis redials a dead pool about once a second
			if err = cb.Flush(ctx); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: Flush: %v", step, err)
	}
	a := "llmguard:{acme}:day:acme"
	if err := g.Reconcile(ctx, "warm", []bucket.Delta{{Key: "llmguard:{warm}:k", Limit: q, Units: 1}}); err != nil {
		t.Fatalf("step 0 (warm): %v", err)
	}

	srv.Kill()
	cb.Charge(bucket.Delta{Key: a, Limit: q, Units: 30})
	cb.Charge(bucket.Delta{Key: a, Limit: q, Units: 30})
	if err := cb.Flush(ctx); !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("step 1 (Redis dead): Flush = %v, want ErrUnavailable", err)
	}
	if s := cb.Stats(); s.Held != 1 || s.Applied != 0 {
		t.Fatalf("step 1 (Redis dead): %+v, want 1 held", s)
	}

	srv.Restart() // empty: Redis keeps no data here
	flushUntil("step 2 (Redis back)")
	if u := used("step 2 (Redis back)", a, q); u != 60 {
		t.Fatalf("step 2 (Redis back): used %d, want 60: the fallback's spend", u)
	}

	lossy.mu.Lock()
	lossy.lose, lossy.ids = 2, nil
	lossy.mu.Unlock()
	cb.Charge(bucket.Delta{Key: a, Limit: q, Units: 50})
	for i := range 2 {
		if err := cb.Flush(ctx); err == nil {
			t.Fatalf("step 3 (reply %d lost): Flush = nil", i+1)
		}
	}
	flushUntil("step 3 (third send)")
	if u := used("step 3 (replayed twice)", a, q); u != 110 {
		t.Fatalf("step 3 (replayed twice): used %d, want 110: 60 + 50 once, in debt past the quota", u)
	}
	if ids := lossy.ids; len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("step 3: request ids %q, want one id sent three times", ids)
	}

	// A period that ended on the node's clock: dropped, counted.
	b := "llmguard:{acme}:day:beta"
	cb.Charge(bucket.Delta{Key: b, Limit: q, Units: 40})
	clockMu.Lock()
	nodeNow = q.WindowEnd
	clockMu.Unlock()
	flushUntil("step 4 (period ended)")
	if n, _ := srv.Client().Exists(ctx, b).Result(); n != 0 {
		t.Fatalf("step 4 (period ended): %s exists in Redis", b)
	}
	if s := cb.Stats(); s.Dropped[bucket.DropPeriodEnded] != 1 {
		t.Fatalf("step 4 (period ended): %+v, want 1 dropped for its period", s)
	}

	// A period the store has moved past (a take named the next window):
	// the script applies the charge to nothing.
	clockMu.Lock()
	nodeNow = time.Now()
	clockMu.Unlock()
	c := "llmguard:{acme}:day:gamma"
	next := bucket.Quota(100, q.WindowEnd, q.WindowEnd.Add(2*time.Hour))
	if d, err := r.Take(ctx, "", []bucket.Item{{Key: c, Limit: next, Cost: 5}}); err != nil || !d.Allowed {
		t.Fatalf("step 5 (take in the next window): %+v, %v", d, err)
	}
	cb.Charge(bucket.Delta{Key: c, Limit: q, Units: 40})
	flushUntil("step 5 (store moved on)")
	if u := used("step 5 (store moved on)", c, next); u != 5 {
		t.Fatalf("step 5 (store moved on): the next window's used %d, want 5 (the charge never moves into it)", u)
	}
}
