package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

// counting is a Store that counts and records the calls it passes on, and
// can be made to fail them.
type counting struct {
	bucket.Store
	mu         sync.Mutex
	takes      []takeCall
	reconciles [][]bucket.Delta
	voids      int
	// fail, when set, fails every call without passing it on; lost
	// passes a Take on and then fails it (a reply lost on the way back).
	fail, lost atomic.Bool
}

type takeCall struct {
	id    string
	items []bucket.Item
}

var errDown = fmt.Errorf("store down: %w", bucket.ErrUnavailable)

func (c *counting) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	c.mu.Lock()
	c.takes = append(c.takes, takeCall{id, append([]bucket.Item(nil), items...)})
	c.mu.Unlock()
	if c.fail.Load() {
		return bucket.Decision{}, errDown
	}
	d, err := c.Store.Take(ctx, id, items)
	if err == nil && c.lost.Load() {
		return bucket.Decision{}, fmt.Errorf("reply lost: %w", context.DeadlineExceeded)
	}
	return d, err
}

func (c *counting) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	c.mu.Lock()
	c.reconciles = append(c.reconciles, append([]bucket.Delta(nil), deltas...))
	c.mu.Unlock()
	if c.fail.Load() {
		return errDown
	}
	return c.Store.Reconcile(ctx, id, deltas)
}

func (c *counting) Void(ctx context.Context, id string, items []bucket.Item) error {
	c.mu.Lock()
	c.voids++
	c.mu.Unlock()
	return c.Store.Void(ctx, id, items)
}

// calls is the number of store calls so far.
func (c *counting) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.takes) + len(c.reconciles) + c.voids
}

func (c *counting) lastTake() takeCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takes[len(c.takes)-1]
}

// leaseRig is a Leased over a counting Memory store, both on one clock.
type leaseRig struct {
	clock *storetest.Clock
	mem   *bucket.Memory
	store *counting
	l     *bucket.Leased
}

func newLeaseRig(t *testing.T, o bucket.LeaseOptions) *leaseRig {
	t.Helper()
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { mem.Close() })
	r := &leaseRig{clock: clock, mem: mem, store: &counting{Store: mem}}
	if o.Now == nil {
		o.Now = clock.Now
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = -1
	}
	r.l = bucket.NewLeased(r.store, o)
	return r
}

// at sets the clock to Start + d.
func (r *leaseRig) at(d time.Duration) { r.clock.Set(storetest.Start.Add(d)) }

// level is the shared bucket's Remaining, read from the store below.
func (r *leaseRig) level(t *testing.T, it bucket.Item) int64 {
	t.Helper()
	d, err := r.mem.Take(context.Background(), "", []bucket.Item{{Key: it.Key, Limit: it.Limit}})
	if err != nil {
		t.Fatal(err)
	}
	return d.Buckets[0].Remaining
}

func (r *leaseRig) take(t *testing.T, id string, items ...bucket.Item) bucket.Decision {
	t.Helper()
	d, err := r.l.Take(context.Background(), id, items)
	if err != nil {
		t.Fatalf("take %s: %v", id, err)
	}
	return d
}

func leased(key string, l bucket.Limit, cost, size int64, ttl time.Duration) bucket.Item {
	return bucket.Item{Key: key, Limit: l, Cost: cost, Lease: bucket.Lease{Size: size, TTL: ttl, Label: "hot"}}
}

// A hot key with a lease of 10 requests' worth costs at most one store call
// per 10 admitted requests (here: one per 11), the returns included, at
// the limit's own rate.
func TestLeaseHotKeyStoreCalls(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Second}
	hot := leased("hot", limit, 1, 10, 100*time.Millisecond)
	const requests = 5000
	admitted := 0
	for n := range requests {
		r.at(time.Duration(n) * time.Millisecond) // 1000 requests a second: the limit's rate
		if r.take(t, fmt.Sprint("r", n), hot).Allowed {
			admitted++
		}
		if n%10 == 9 {
			if err := r.l.Sweep(r.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := r.store.calls()
	perRequest := float64(calls) / float64(admitted)
	t.Logf("%d requests, %d admitted, %d store calls: %.3f per admitted request", requests, admitted, calls, perRequest)
	if admitted != requests {
		t.Errorf("admitted %d of %d at the limit's rate", admitted, requests)
	}
	if perRequest > 0.1 {
		t.Errorf("%.3f store calls per admitted request, want <= 0.1", perRequest)
	}
	st := r.l.Stats()["hot"]
	if st.Served == 0 || st.Taken == 0 {
		t.Errorf("stats %+v: no lease taken or served", st)
	}
}

// Many goroutines on one hot key: one take acquires a lease at a time, the
// others wait for it and spend it, so store calls stay at one per lease.
func TestLeaseHotKeyConcurrent(t *testing.T) {
	var served atomic.Int64
	start := storetest.Start
	// The clock moves 1ms per request taken: the limit's rate.
	now := func() time.Time { return start.Add(time.Duration(served.Load()) * time.Millisecond) }
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: now, SweepEvery: -1})
	defer mem.Close()
	store := &counting{Store: mem}
	l := bucket.NewLeased(store, bucket.LeaseOptions{Now: now, SweepEvery: -1})
	limit := bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Second}
	// A lease of 20: more than the 16 takes that may be waiting for it.
	hot := leased("hot", limit, 1, 20, 100*time.Millisecond)
	const workers, each = 16, 400
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				d, err := l.Take(context.Background(), fmt.Sprint(w, "-", n), []bucket.Item{hot})
				served.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	takes := len(store.takes)
	perRequest := float64(store.calls()) / float64(admitted.Load())
	t.Logf("%d workers: %d admitted, %d takes, %d calls: %.3f per admitted request", workers, admitted.Load(), takes, store.calls(), perRequest)
	if admitted.Load() != workers*each {
		t.Errorf("admitted %d of %d", admitted.Load(), workers*each)
	}
	if perRequest > 0.1 {
		t.Errorf("%.3f store calls per admitted request, want <= 0.1", perRequest)
	}
	if st := l.Stats()["hot"]; st.Outstanding != 0 {
		t.Errorf("%d units still outstanding after Close", st.Outstanding)
	}
}

// blocking is a Store whose Takes wait until release is closed.
type blocking struct {
	bucket.Store
	entered chan struct{}
	release chan struct{}
	takes   atomic.Int64
	mu      sync.Mutex
	ids     []string // of the takes, in order
}

func (b *blocking) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	b.takes.Add(1)
	b.mu.Lock()
	b.ids = append(b.ids, id)
	b.mu.Unlock()
	b.entered <- struct{}{}
	<-b.release
	return b.Store.Take(ctx, id, items)
}

// Single flight: while one take acquires a lease for a bucket, the others
// on it wait, and are served from that lease: one store call for all.
func TestLeaseSingleFlight(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer mem.Close()
	b := &blocking{Store: mem, entered: make(chan struct{}, 100), release: make(chan struct{})}
	l := bucket.NewLeased(b, bucket.LeaseOptions{Now: clock.Now, SweepEvery: -1})
	hot := leased("hot", bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Second}, 1, 50, time.Second)
	const waiters = 10
	var wg sync.WaitGroup
	var admitted atomic.Int64
	take := func(id string) {
		defer wg.Done()
		d, err := l.Take(context.Background(), id, []bucket.Item{hot})
		if err != nil {
			t.Error(err)
		} else if d.Allowed {
			admitted.Add(1)
		}
	}
	release := sync.OnceFunc(func() { close(b.release) })
	t.Cleanup(release) // no take left blocked when the test fails
	wg.Add(1)
	go take("first")
	<-b.entered // the first take is in the store, holding the flight
	for i := range waiters {
		wg.Add(1)
		go take(fmt.Sprint("w", i))
	}
	// Every waiter waits for the flight (one that went to the store
	// instead would block there, and never be counted as waiting).
	for i := 0; l.Waiting() < waiters; i++ {
		if i == 10000 || b.takes.Load() > 1 {
			t.Fatalf("%d of %d takes wait for the lease; %d store takes", l.Waiting(), waiters, b.takes.Load())
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	if n := b.takes.Load(); n != 1 {
		t.Errorf("%d store takes for %d concurrent requests on one bucket, want 1", n, waiters+1)
	}
	if admitted.Load() != waiters+1 {
		t.Errorf("admitted %d, want %d", admitted.Load(), waiters+1)
	}
}

// A denial spends nothing: not the units a lease paid toward it, not the
// lease it asked for, not the other buckets.
func TestLeaseDenialSpendsNothing(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	global := leased("global", bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Second}, 2, 40, time.Second)
	user := bucket.Item{Key: "user", Limit: bucket.Limit{Capacity: 3, Rate: 1, Per: time.Second}, Cost: 2}

	// Denied by the user bucket while the global lease is empty: the take
	// asked for the lease (2 + 40) and the store wrote nothing.
	empty := bucket.Item{Key: "user", Limit: user.Limit, Cost: 3}
	if !r.take(t, "drain", empty).Allowed {
		t.Fatal("drain denied")
	}
	d := r.take(t, "denied-1", user, global)
	if d.Allowed || d.DeniedBy != 0 {
		t.Fatalf("decision %+v, want denied by the user bucket", d)
	}
	if got := r.level(t, global); got != 1000 {
		t.Errorf("global level %d after a denial, want 1000", got)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 0 || st.Taken != 0 {
		t.Errorf("lease stats %+v after a denial, want nothing taken", st)
	}
	// The retry-after is the user bucket's wait for its own cost: 2 units
	// at 1 a second.
	if d.RetryAfter != 2*time.Second {
		t.Errorf("retry after %v, want 2s", d.RetryAfter)
	}

	// With a lease held: the denial puts back what the lease paid.
	r.at(10 * time.Second) // user full again
	if !r.take(t, "lease", user, global).Allowed {
		t.Fatal("take with lease denied")
	}
	held := r.l.Stats()["hot"].Outstanding
	globalLevel := r.level(t, global)
	if held == 0 {
		t.Fatal("no lease held")
	}
	r.take(t, "drain-2", bucket.Item{Key: "user", Limit: user.Limit, Cost: 1}) // user 0
	d = r.take(t, "denied-2", user, global)
	if d.Allowed || d.DeniedBy != 0 {
		t.Fatalf("decision %+v, want denied by the user bucket", d)
	}
	if got := r.l.Stats()["hot"].Outstanding; got != held {
		t.Errorf("lease holds %d after a denial, want %d", got, held)
	}
	if got := r.level(t, global); got != globalLevel {
		t.Errorf("global level %d after a denial, want %d", got, globalLevel)
	}
	if got := r.level(t, user); got != 0 {
		t.Errorf("user level %d after a denial, want 0", got)
	}
}

// Leases shrink as the bucket runs low: at most a quarter of the level
// seen beyond the request; a lease refused when the request alone fits is
// dropped and the request taken alone; a denial then waits for the
// request's own cost.
func TestLeaseShrinksNearEmpty(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Second}
	hot := leased("hot", limit, 1, 40, time.Hour)

	// Full: min(40, ¼ × (100 − 1)) = 24 on top of the request's 1.
	r.take(t, "a", hot)
	if got := r.store.lastTake().items[0].Cost; got != 25 {
		t.Fatalf("first take sent cost %d, want 1 + 24", got)
	}
	// Another node drains the bucket to 2 (75 − 73); this one still
	// believes 75.
	if d, _ := r.mem.Take(context.Background(), "", []bucket.Item{{Key: "hot", Limit: limit, Cost: 73}}); !d.Allowed {
		t.Fatal("drain denied")
	}
	for i := range 24 { // the lease: no store call
		if !r.take(t, fmt.Sprint("l", i), hot).Allowed {
			t.Fatalf("request %d denied with a lease held", i)
		}
	}
	before := len(r.store.takes)
	// The lease is spent: ask for ¼ × (75 − 1) = 18 more; denied (2 left);
	// taken again for 1 alone.
	if !r.take(t, "b", hot).Allowed {
		t.Fatal("a request that fits the bucket was denied")
	}
	var sent []int64
	for _, c := range r.store.takes[before:] {
		sent = append(sent, c.items[0].Cost)
	}
	if fmt.Sprint(sent) != "[19 1]" {
		t.Errorf("takes sent costs %v, want [19 1] (lease refused, then the request alone)", sent)
	}
	if got := r.store.lastTake().id; got != "b#lease" {
		t.Errorf("second take under request id %q, want b#lease", got)
	}
	// 1 left: ¼ × (1 − 1) = 0: no lease, the request alone, one call.
	before = len(r.store.takes)
	if !r.take(t, "c", hot).Allowed {
		t.Fatal("the last unit was denied")
	}
	if got := r.store.takes[before:]; len(got) != 1 || got[0].items[0].Cost != 1 {
		t.Errorf("takes %+v, want one of cost 1", got)
	}
	// Empty: denied, retry after the wait for 1 unit (1s), not for a lease.
	d := r.take(t, "d", hot)
	if d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("decision %+v, want denied with retry after 1s", d)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 0 {
		t.Errorf("%d units held with the bucket empty", st.Outstanding)
	}
}

// Unused units go back when the lease expires, not before.
func TestLeaseReturnsUnusedAtExpiry(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	hot := leased("hot", limit, 1, 20, 100*time.Millisecond)
	r.take(t, "a", hot)
	if got := r.level(t, hot); got != 1000-21 {
		t.Fatalf("level %d after a lease of 20, want %d", got, 1000-21)
	}
	r.at(100*time.Millisecond - time.Microsecond)
	if err := r.l.Sweep(r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := r.level(t, hot); got != 1000-21 {
		t.Errorf("level %d before expiry, want %d (lease not yet returned)", got, 1000-21)
	}
	r.at(100 * time.Millisecond)
	if err := r.l.Sweep(r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := r.level(t, hot); got != 1000-1 {
		t.Errorf("level %d after expiry, want %d (20 unused units back)", got, 1000-1)
	}
	st := r.l.Stats()["hot"]
	if st.Returned != 1 || st.ReturnedUnits != 20 || st.Outstanding != 0 {
		t.Errorf("stats %+v, want one return of 20 units, none outstanding", st)
	}
	// An expired lease is not spent: the next take goes to the store.
	before := r.store.calls()
	r.take(t, "b", hot)
	if r.store.calls() == before {
		t.Error("a take after expiry made no store call")
	}
}

// An expired lease that no sweep has returned yet is given back by the
// next take of its bucket, never spent.
func TestLeaseExpiredNotSpent(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	hot := leased("hot", limit, 1, 20, 100*time.Millisecond)
	r.take(t, "a", hot) // holds 20
	r.at(time.Second)
	r.take(t, "b", hot) // the 20 expired: given back (queued), a new lease of 20
	if err := r.l.Sweep(r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	// Taken: 21 + 21, returned 20: the bucket lost 22 of which 20 are held.
	if got := r.level(t, hot); got != 1000-22 {
		t.Errorf("level %d, want %d", got, 1000-22)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 20 || st.ReturnedUnits != 20 {
		t.Errorf("stats %+v, want 20 held and 20 returned", st)
	}
}

// While the store is down a held lease is still spent (capacity already
// taken); once it is spent the take fails as the store's does, and puts
// back what the lease paid toward it.
func TestLeaseSpentWhileStoreDown(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	hot := leased("hot", limit, 2, 7, time.Hour)
	r.take(t, "a", hot) // holds 7
	r.store.fail.Store(true)
	for i := range 3 {
		if !r.take(t, fmt.Sprint("down", i), hot).Allowed {
			t.Fatalf("request %d denied with a lease held", i)
		}
	}
	// 1 unit left, cost 2: the store is needed.
	_, err := r.l.Take(context.Background(), "down-3", []bucket.Item{hot})
	if !errors.Is(err, bucket.ErrUnavailable) {
		t.Fatalf("err %v, want the store's", err)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 1 {
		t.Errorf("lease holds %d after a failed take, want the 1 unit put back", st.Outstanding)
	}
	r.store.fail.Store(false)
	if !r.take(t, "up", hot).Allowed {
		t.Fatal("denied once the store is back")
	}
}

// A take that failed but may have been applied is voided as it was sent:
// the lease it asked for included, once. A void that comes first makes the
// take fail with ErrVoided.
func TestLeaseVoid(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	hot := leased("hot", limit, 1, 20, time.Hour)
	r.store.lost.Store(true)
	_, err := r.l.Take(context.Background(), "lost", []bucket.Item{hot})
	if err == nil || !bucket.MayHaveApplied(err) {
		t.Fatalf("err %v, want a failure that may have applied", err)
	}
	r.store.lost.Store(false)
	if got := r.level(t, hot); got != 1000-21 {
		t.Fatalf("level %d: the lost take was not applied", got)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 0 {
		t.Fatalf("a failed take left %d units in the lease", st.Outstanding)
	}
	for range 2 {
		if err := r.l.Void(context.Background(), "lost", []bucket.Item{hot}); err != nil {
			t.Fatal(err)
		}
		if got := r.level(t, hot); got != 1000 {
			t.Errorf("level %d after the void, want 1000 (the 21 units sent, once)", got)
		}
	}
	if err := r.l.Void(context.Background(), "early", []bucket.Item{hot}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.l.Take(context.Background(), "early", []bucket.Item{hot}); !errors.Is(err, bucket.ErrVoided) {
		t.Errorf("take after its void: err %v, want ErrVoided", err)
	}
	if got := r.level(t, hot); got != 1000 {
		t.Errorf("level %d after a voided take, want 1000", got)
	}
	// The void window passes: the tombstone is forgotten.
	r.at(bucket.DefaultVoidWindow)
	if err := r.l.Sweep(r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if d := r.take(t, "early", hot); !d.Allowed {
		t.Errorf("take past the void window: %+v, want admitted", d)
	}
}

// Invalid leases are refused before anything is taken.
func TestLeaseInvalid(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	for _, it := range []bucket.Item{
		leased("neg", limit, 1, -1, time.Second),
		leased("ttl", limit, 1, 5, 0),
		leased("quota", bucket.Quota(10, storetest.Start, storetest.Start.Add(time.Hour)), 1, 5, time.Second),
	} {
		if _, err := r.l.Take(context.Background(), "", []bucket.Item{it}); !errors.Is(err, bucket.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", it.Key, err)
		}
	}
	if n := r.store.calls(); n != 0 {
		t.Errorf("%d store calls for invalid takes", n)
	}
}

// A cost above the capacity is never paid from a lease: the store finds
// it too large.
func TestLeaseTooLarge(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	r.take(t, "a", leased("k", limit, 1, 10, time.Hour)) // holds 2 (¼ × 9)
	d := r.take(t, "b", leased("k", limit, 11, 10, time.Hour))
	if d.Allowed || !d.TooLarge {
		t.Errorf("decision %+v, want too large", d)
	}
}

// Close gives every lease back; ReturnAll (a reload) too.
func TestLeaseCloseReturnsAll(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	a, b := leased("a", limit, 1, 20, time.Hour), leased("b", limit, 1, 20, time.Hour)
	r.take(t, "1", a, b)
	if err := r.l.ReturnAll(); err != nil {
		t.Fatal(err)
	}
	if got := r.level(t, a) + r.level(t, b); got != 2*999 {
		t.Errorf("levels sum %d after ReturnAll, want %d", got, 2*999)
	}
	r.take(t, "2", a)
	if err := r.l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := r.level(t, a); got != 998 {
		t.Errorf("level %d after Close, want 998", got)
	}
	if st := r.l.Stats()["hot"]; st.Outstanding != 0 {
		t.Errorf("%d units outstanding after Close", st.Outstanding)
	}
	// After Close, takes go to the store as they are.
	before := r.store.calls()
	r.take(t, "3", a)
	if r.store.calls() != before+1 || r.store.lastTake().items[0].Cost != 1 {
		t.Errorf("take after Close: %+v, want the item as it is", r.store.lastTake())
	}
}

// The contract holds through a Leased for items without leases (passed
// through).
func TestLeasedContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
		l := bucket.NewLeased(mem, bucket.LeaseOptions{Now: clock.Now})
		t.Cleanup(func() { l.Close(); mem.Close() })
		return l
	})
}

// A take woken by the lease it waited for is served from it, even when a
// take that did not wait comes first: the units the waiters asked for are
// reserved for them, and the newcomer goes to the store.
func TestLeaseWaitersServedFirst(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer mem.Close()
	b := &blocking{Store: mem, entered: make(chan struct{}, 100), release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(b.release) })
	t.Cleanup(release)
	// The Leased's clock can hold the next caller, to order the takes.
	var gateMu sync.Mutex
	armed, held, open := false, make(chan struct{}), make(chan struct{})
	now := func() time.Time {
		gateMu.Lock()
		hold := armed
		armed = false
		gateMu.Unlock()
		if hold {
			held <- struct{}{}
			<-open
		}
		return clock.Now()
	}
	l := bucket.NewLeased(b, bucket.LeaseOptions{Now: now, SweepEvery: -1})
	// A lease of 1 (a quarter of 7 left after the first request): room for
	// one waiter.
	hot := leased("hot", bucket.Limit{Capacity: 8, Rate: 1, Per: time.Hour}, 1, 8, time.Hour)
	var wg sync.WaitGroup
	results := make(map[string]bool)
	var mu sync.Mutex
	take := func(id string) {
		defer wg.Done()
		d, err := l.Take(context.Background(), id, []bucket.Item{hot})
		mu.Lock()
		results[id] = err == nil && d.Allowed
		mu.Unlock()
	}
	wg.Add(2)
	go take("first")
	<-b.entered
	go take("waiter")
	for i := 0; l.Waiting() < 1; i++ {
		if i == 10000 {
			t.Fatal("the second take does not wait for the lease")
		}
		time.Sleep(time.Millisecond)
	}
	gateMu.Lock()
	armed = true // the waiter's next reading of the clock, once woken
	gateMu.Unlock()
	release() // the first take gets its lease of 1, and wakes the waiter
	<-held    // the waiter is woken, held before it looks at the lease
	newcomer, err := l.Take(context.Background(), "newcomer", []bucket.Item{hot})
	if err != nil || !newcomer.Allowed {
		t.Fatalf("newcomer: %+v %v", newcomer, err)
	}
	close(open)
	wg.Wait()
	if !results["first"] || !results["waiter"] {
		t.Fatalf("results %v, want both admitted", results)
	}
	if got := fmt.Sprint(b.ids); got != "[first newcomer]" {
		t.Errorf("store takes %s, want [first newcomer]: the waiter is served from the lease it waited for", got)
	}
}

// A lease larger than the item's capacity (a region's share of the limit,
// a shard) is bounded by it: never an error, never a take above it.
func TestLeaseLargerThanCapacity(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{Share: 1})
	limit := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Hour}
	d := r.take(t, "a", leased("k", limit, 1, 100, time.Hour))
	if !d.Allowed {
		t.Fatalf("decision %+v", d)
	}
	if got := r.store.lastTake().items[0].Cost; got != 10 {
		t.Errorf("take of %d, want the capacity, 10", got)
	}
}

// Over a DenyCache, a denial answered from memory is reported as cached,
// with the denying bucket's status, and the other buckets' levels this node
// knows are kept (the cache does not know them).
func TestLeaseOverDenyCache(t *testing.T) {
	clock := storetest.NewClock(storetest.Start)
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer mem.Close()
	cached := 0 // denials the cache answered (llmguard_denials_cached_total)
	dc := bucket.NewDenyCache(mem, bucket.DenyCacheOptions{Window: time.Second, Now: clock.Now,
		OnCached: func(bucket.Item) { cached++ }})
	defer dc.Close()
	store := &counting{Store: dc}
	l := bucket.NewLeased(store, bucket.LeaseOptions{Now: clock.Now, SweepEvery: -1})
	defer l.Close()
	global := leased("global", bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}, 1, 10, time.Hour)
	user := bucket.Item{Key: "user", Limit: bucket.Limit{Capacity: 1, Rate: 1, Per: time.Hour}, Cost: 1}
	take := func(id string) bucket.Decision {
		t.Helper()
		d, err := l.Take(context.Background(), id, []bucket.Item{user, global})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if !take("a").Allowed { // user now empty; global leased
		t.Fatal("first take denied")
	}
	// Spend the lease, so that the next takes ask the store for the
	// global bucket too.
	for i := range 10 {
		l.Take(context.Background(), fmt.Sprint("g", i), []bucket.Item{global})
	}
	// The store denies b by the user bucket, which was asked for no lease:
	// the denial stands (taking again without the global bucket's fill
	// would ask the user bucket for the same cost). c is then answered by
	// the cache, once: one call of the cache (counting wraps it) and one
	// cached denial a request. Before, each took again without the fill:
	// two calls, and c two cached denials.
	for _, step := range []struct {
		id             string
		cached         bool
		calls, byCache int
	}{{"b", false, 1, 0}, {"c", true, 1, 1}} {
		calls, was := store.calls(), cached
		d := take(step.id)
		if d.Allowed || d.Cached != step.cached || d.DeniedBy != 0 || d.Buckets[0].Remaining != 0 {
			t.Fatalf("take %s: %+v, want a denial by the user bucket, cached %v", step.id, d, step.cached)
		}
		if n := store.calls() - calls; n != step.calls {
			t.Errorf("take %s: %d calls of the cache, want %d", step.id, n, step.calls)
		}
		if n := cached - was; n != step.byCache {
			t.Errorf("take %s: %d denials answered by the cache, want %d", step.id, n, step.byCache)
		}
		// The global bucket's level this node knows is kept (989 seen).
		if d.Buckets[1].Remaining < 900 {
			t.Errorf("take %s: global bucket %+v, want the level seen before the cached denial", step.id, d.Buckets[1])
		}
	}
	st := l.Stats()["hot"]
	clock.Set(storetest.Start.Add(time.Hour)) // user refilled
	if !take("e").Allowed {
		t.Fatal("denied once the user bucket refilled")
	}
	if got := l.Stats()["hot"]; got.Taken != st.Taken+1 {
		t.Errorf("leases taken %d then %d, want one more: the level seen survived the cached denial", st.Taken, got.Taken)
	}
}

// A sharded leased item (TakeSharded over a Leased store) leases each shard
// for Size/K: a hot sharded bucket also costs a store call per lease.
func TestLeaseSharded(t *testing.T) {
	r := newLeaseRig(t, bucket.LeaseOptions{})
	limit := bucket.Limit{Capacity: 4000, Rate: 4000, Per: time.Second}
	item := bucket.ShardedItem{
		Item:   leased("llmguard:{acme}:rps:acme", limit, 1, 40, 100*time.Millisecond),
		Shards: 4,
		Keys:   bucket.ShardKeys{Prefix: "llmguard:{acme:", Suffix: "}:rps:acme"},
	}
	const requests = 4000
	admitted := 0
	for n := range requests {
		r.at(time.Duration(n) * 250 * time.Microsecond) // the limit's rate
		d, err := bucket.TakeSharded(context.Background(), r.l, fmt.Sprint("r", n), []bucket.ShardedItem{item}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	calls := r.store.calls()
	t.Logf("%d requests, %d admitted, %d store calls", requests, admitted, calls)
	if admitted != requests {
		t.Errorf("admitted %d of %d at the limit's rate", admitted, requests)
	}
	if per := float64(calls) / float64(admitted); per > 0.1 {
		t.Errorf("%.3f store calls per admitted request, want <= 0.1 (leases of 10 per shard)", per)
	}
	for _, c := range r.store.takes {
		if c.items[0].Cost > 11 {
			t.Fatalf("a take of %d from one shard, want at most 1 + 40/4", c.items[0].Cost)
		}
	}
}
