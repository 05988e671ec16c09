package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// mastersStore is a two-master store over a Memory: a key of a hash slot
// from 8192 up lives on master "m-b" (MasterOf, which a test may
// re-route), every other key on "m-a", as a Redis Cluster of two masters
// shares the slots. While bDown, every call with a key
// on m-b fails as Redis's would, naming that key (a take's Subject, a
// reconcile's Key); calls counts the calls that reached it.
type mastersStore struct {
	mem   *bucket.Memory
	bDown atomic.Bool
	calls atomic.Int64

	mu     sync.Mutex
	routeB string // the master of m-b's keys: "m-b" until a failover
}

func newMastersStore() *mastersStore {
	frozen := time.Unix(1_700_000_000, 0)
	return &mastersStore{mem: bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return frozen }, SweepEvery: -1}), routeB: "m-b"}
}

func (s *mastersStore) masterOf(key string) string {
	if bucket.SlotOf(key) >= 8192 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.routeB
	}
	return "m-a"
}

// onB is the first key of keys on master m-b while it is down, "" if none.
func (s *mastersStore) onB(n int, key func(int) string) string {
	for i := range n {
		if s.bDown.Load() && s.masterOf(key(i)) == "m-b" {
			return key(i)
		}
	}
	return ""
}

func (s *mastersStore) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	s.calls.Add(1)
	if k := s.onB(len(items), func(i int) string { return items[i].Key }); k != "" {
		return bucket.Decision{}, &bucket.StoreError{Op: "take", Subject: k, Err: errRefused}
	}
	return s.mem.Take(ctx, id, items)
}

func (s *mastersStore) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	s.calls.Add(1)
	if k := s.onB(len(deltas), func(i int) string { return deltas[i].Key }); k != "" {
		return &bucket.StoreError{Op: "reconcile", Subject: id, Key: k, Err: errRefused}
	}
	return s.mem.Reconcile(ctx, id, deltas)
}

func (s *mastersStore) Void(ctx context.Context, id string, items []bucket.Item) error {
	s.calls.Add(1)
	if k := s.onB(len(items), func(i int) string { return items[i].Key }); k != "" {
		return &bucket.StoreError{Op: "void", Subject: id, Key: k, Err: errRefused}
	}
	return s.mem.Void(ctx, id, items)
}

// keyOn returns a bucket key "llmguard:{tN}:rps:tN" that s places on master.
func keyOn(t *testing.T, s *mastersStore, master string) string {
	t.Helper()
	for n := range 100 {
		k := fmt.Sprintf("llmguard:{t%d}:rps:t%d", n, n)
		if s.masterOf(k) == master {
			return k
		}
	}
	t.Fatalf("no key on %s", master)
	return ""
}

// states is g's breakers as "master=state" in master order, and
// "AnyFailing disagrees" after them when g.AnyFailing does not say what the
// list says (a breaker not closed, or its master's last call failed).
func states(g *bucket.Guarded) string {
	var out []string
	failing := false
	for _, b := range g.Breakers() {
		out = append(out, b.Master+"="+b.State.String())
		failing = failing || b.Failing || b.State != bucket.BreakerClosed
	}
	if g.AnyFailing() != failing {
		out = append(out, "AnyFailing disagrees")
	}
	return strings.Join(out, " ")
}

// TestGuardedBreakerPerMaster walks one master of two going down under a
// Guarded store with GuardOptions.MasterOf: only its breaker opens (trial17,
// adv42: one breaker for the store opened for every key); the other
// master's keys keep being sent; a take with a key on each is rejected
// whole without reaching the store (each rule then fails open or closed as
// configured); a failure of such a take counts against the master of the
// key that failed only; a reconcile batch sends the healthy master's
// elements and rejects the others; a charge-back's (background) call is
// not let through an open or half-open breaker; the breaker closes once its
// master answers; and a failover that moves the slots to another master
// leaves the old breaker to Forget.
func TestGuardedBreakerPerMaster(t *testing.T) {
	s := newMastersStore()
	tr := &transitions{}
	const openFor = 50 * time.Millisecond
	g := bucket.NewGuarded(s, bucket.GuardOptions{MinCalls: 3, OpenFor: openFor, Timeout: time.Hour, ReconcileTimeout: time.Hour,
		MasterOf: s.masterOf, OnStateChange: tr.record})
	ctx := context.Background()
	a := []bucket.Item{{Key: keyOn(t, s, "m-a"), Limit: guardLimit, Cost: 1}}
	b := []bucket.Item{{Key: keyOn(t, s, "m-b"), Limit: guardLimit, Cost: 1}}
	both := append(append([]bucket.Item{}, b...), a...)
	if _, err := g.Take(ctx, "", both); err != nil {
		t.Fatalf("step 0 (both up): %v", err)
	}
	if got := states(g); got != "m-a=closed m-b=closed" {
		t.Fatalf("step 0 (both up): breakers %s, want one per master, closed", got)
	}

	// Step 1: m-b goes down; takes spanning both masters fail on m-b's key.
	s.bDown.Store(true)
	// (The failure ratio opens m-b's at the second failure: 2 of 3 calls.)
	for i := range 3 {
		_, err := g.Take(ctx, "", both)
		if errors.Is(err, bucket.ErrNotSent) && i > 0 {
			break
		}
		if !errors.Is(err, bucket.ErrUnavailable) || errors.Is(err, bucket.ErrNotSent) {
			t.Fatalf("step 1 (m-b down), take %d: %v, want a failure", i, err)
		}
	}
	if got := states(g); got != "m-a=closed m-b=open" {
		t.Fatalf("step 1 (m-b down): breakers %s: the failures counted against m-a too", got)
	}
	if got := strings.Join(tr.list(), ","); got != "m-b: closed->open" {
		t.Fatalf("step 1 (m-b down): transitions %s", got)
	}
	if g.State() != bucket.BreakerOpen {
		t.Errorf("step 1 (m-b down): State %v, want the worst, open", g.State())
	}

	// Step 2: m-a's keys are still sent and served, many times over.
	for i := range 10 {
		if d, err := g.Take(ctx, "", a); err != nil || !d.Allowed {
			t.Fatalf("step 2 (m-a's keys), take %d: %+v %v: sent to the store while m-b is down", i, d, err)
		}
	}
	// A take with a key on m-b is rejected whole, unsent, wherever m-b's
	// key is among its items.
	aFirst := append(append([]bucket.Item{}, a...), b...)
	for _, items := range [][]bucket.Item{both, aFirst} {
		calls := s.calls.Load()
		_, err := g.Take(ctx, "", items)
		if !errors.Is(err, bucket.ErrNotSent) || !strings.Contains(err.Error(), "breaker open for master m-b") {
			t.Fatalf("step 2 (a take on both masters, %s first): %v, want a rejection by m-b's breaker", items[0].Key, err)
		}
		if n := s.calls.Load() - calls; n != 0 {
			t.Fatalf("step 2 (a take on both masters, %s first): %d calls reached the store, want none", items[0].Key, n)
		}
	}

	// Step 3: a batch sends m-a's element and rejects m-b's.
	da := []bucket.Delta{{Key: a[0].Key, Limit: guardLimit, Units: 1}}
	db := []bucket.Delta{{Key: b[0].Key, Limit: guardLimit, Units: 1}}
	errs := g.ReconcileBatch(ctx, []bucket.Reconciliation{{RequestID: "ra", Deltas: da}, {RequestID: "rb", Deltas: db}})
	if errs[0] != nil || !errors.Is(errs[1], bucket.ErrNotSent) || !errors.Is(errs[1], bucket.ErrUnavailable) {
		t.Fatalf("step 3 (batch): %v, want m-a's applied and m-b's rejected", errs)
	}

	// Step 4: m-b is back; after OpenFor a background call (a charge) is
	// still not let through the half-open breaker; a request's take is,
	// and closes it.
	s.bDown.Store(false)
	time.Sleep(openFor + 10*time.Millisecond) // OpenFor is gobreaker's own wall-clock timer
	if err := g.Reconcile(bucket.WithBackgroundForTest(ctx), "charge", db); !errors.Is(err, bucket.ErrNotSent) {
		t.Fatalf("step 4 (m-b half-open): a charge got %v, want it rejected", err)
	}
	if _, err := g.Take(ctx, "", b); err != nil {
		t.Fatalf("step 4 (m-b back): probe take %v", err)
	}
	if got := states(g); got != "m-a=closed m-b=closed" {
		t.Fatalf("step 4 (m-b back): breakers %s", got)
	}
	// A master whose last call failed gets no charge, breaker closed or
	// not, until a call to it succeeds again.
	s.bDown.Store(true)
	g.Take(ctx, "", b)
	if got := states(g); got != "m-a=closed m-b=closed" || !g.AnyFailing() {
		t.Fatalf("step 4 (m-b failing, breaker closed): breakers %s, AnyFailing %v: want m-b's failed call to count", got, g.AnyFailing())
	}
	calls := s.calls.Load()
	if err := g.Reconcile(bucket.WithBackgroundForTest(ctx), "charge", db); !errors.Is(err, bucket.ErrNotSent) || s.calls.Load() != calls {
		t.Fatalf("step 4 (m-b failing, breaker %v): a charge got %v, want it rejected unsent", g.State(), err)
	}
	s.bDown.Store(false)
	g.Take(ctx, "", b)
	if g.AnyFailing() {
		t.Fatalf("step 4 (m-b answers again): AnyFailing with breakers %s", states(g))
	}
	if err := g.Reconcile(bucket.WithBackgroundForTest(ctx), "charge", db); err != nil {
		t.Fatalf("step 4 (m-b answers again): a charge got %v", err)
	}

	// Step 5: m-b fails over to m-c: its keys go to m-c's breaker, and m-b's,
	// opened meanwhile, is forgotten.
	s.bDown.Store(true)
	for range 3 {
		g.Take(ctx, "", b)
	}
	s.mu.Lock()
	s.routeB = "m-c"
	s.mu.Unlock()
	s.bDown.Store(false)
	if _, err := g.Take(ctx, "", b); err != nil {
		t.Fatalf("step 5 (failed over): %v: still routed to m-b's open breaker", err)
	}
	if gone := g.Forget(); len(gone) != 1 || gone[0] != "m-b" {
		t.Fatalf("step 5 (failed over): Forget dropped %v, want [m-b]", gone)
	}
	if got := states(g); got != "m-a=closed m-c=closed" {
		t.Fatalf("step 5 (failed over): breakers %s", got)
	}
}

// With no MasterOf the store has one breaker, named by Name: a failure of
// any key opens it for every key, as before.
func TestGuardedOneBreakerWithoutMasterOf(t *testing.T) {
	s := newMastersStore()
	g := bucket.NewGuarded(s, bucket.GuardOptions{MinCalls: 3, OpenFor: time.Hour, Timeout: time.Hour, Name: "redis:6379"})
	ctx := context.Background()
	s.bDown.Store(true)
	for range 3 {
		g.Take(ctx, "", []bucket.Item{{Key: keyOn(t, s, "m-b"), Limit: guardLimit, Cost: 1}})
	}
	_, err := g.Take(ctx, "", []bucket.Item{{Key: keyOn(t, s, "m-a"), Limit: guardLimit, Cost: 1}})
	if !errors.Is(err, bucket.ErrNotSent) {
		t.Fatalf("take of another key: %v, want the one breaker's rejection", err)
	}
	if got := states(g); got != "redis:6379=open" {
		t.Fatalf("breakers %s", got)
	}
}
