package bucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// chargeStore is a shared store for ChargeBack tests: a Memory on an
// injected clock, whose Reconcile can fail before the store sees it
// (down: ErrUnavailable and ErrNotSent, as a Guarded store's open breaker
// answers) or after it applied the call (lost: a timeout whose reply never
// came).
type chargeStore struct {
	*Memory
	mu    sync.Mutex
	down  bool
	lost  int // the next lost calls are applied, then reported failed
	calls []string
	// refuse names the keys whose master refuses writes: a charge with a
	// delta on one fails (a failed call, not a rejected one) unapplied.
	refuse map[string]bool
	// reject names the keys whose master's breaker is open: a charge with
	// a delta on one is rejected (ErrNotSent) unapplied.
	reject map[string]bool
}

func (f *chargeStore) Reconcile(ctx context.Context, id string, deltas []Delta) error {
	f.mu.Lock()
	down, lost := f.down, f.lost > 0
	if lost {
		f.lost--
	}
	f.calls = append(f.calls, id)
	refused := slices.ContainsFunc(deltas, func(d Delta) bool { return f.refuse[d.Key] })
	down = down || slices.ContainsFunc(deltas, func(d Delta) bool { return f.reject[d.Key] })
	f.mu.Unlock()
	if refused {
		return &unavailableError{op: OpReconcile, cause: errors.New("OOM command not allowed when used memory > 'maxmemory'")}
	}
	if down {
		return &unavailableError{op: OpReconcile, cause: errors.New("dial: refused"), rejected: true}
	}
	if err := f.Memory.Reconcile(ctx, id, deltas); err != nil {
		return err
	}
	if lost {
		return &unavailableError{op: OpReconcile, cause: context.DeadlineExceeded}
	}
	return nil
}

// chargeRig is a ChargeBack over a chargeStore, both on clock.
type chargeRig struct {
	clock *chargeClock
	store *chargeStore
	cb    *ChargeBack
}

type chargeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *chargeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *chargeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newChargeRig(t *testing.T, o ChargeOptions) *chargeRig {
	t.Helper()
	clock := &chargeClock{t: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	mem := NewMemory(MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { mem.Close() })
	st := &chargeStore{Memory: mem}
	o.Store, o.Now = st, clock.Now
	cb, err := NewChargeBack(o)
	if err != nil {
		t.Fatal(err)
	}
	return &chargeRig{clock: clock, store: st, cb: cb}
}

// day is the quota of 100 units of the UTC day of now.
func day(now time.Time) Limit {
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return Quota(100, start, start.AddDate(0, 0, 1))
}

// used is what the store's quota l on key has used, read by a take of 0.
func (r *chargeRig) used(t *testing.T, key string, l Limit) int64 {
	t.Helper()
	d, err := r.store.Memory.Take(context.Background(), "", []Item{{Key: key, Limit: l}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Capacity - d.Buckets[0].Remaining
}

func (r *chargeRig) setDown(down bool) {
	r.store.mu.Lock()
	r.store.down = down
	r.store.mu.Unlock()
}

func (r *chargeRig) loseNext(n int) {
	r.store.mu.Lock()
	r.store.lost = n
	r.store.mu.Unlock()
}

func checkStats(t *testing.T, step string, got ChargeStats, want ChargeStats) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: stats %+v, want %+v", step, got, want)
	}
}

// TestChargeBackAppliesOnceWhenBack: spend held through an outage is
// charged when the store is back, into the quota's own window, beyond the
// quota as debt; a second Flush sends nothing more.
func TestChargeBackAppliesOnceWhenBack(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{})
	ctx := context.Background()
	q := day(r.clock.Now())
	r.setDown(true)
	for i := range 3 {
		if !r.cb.Charge(Delta{Key: "k", Limit: q, Units: 40}) {
			t.Fatalf("step 1 (charge %d): refused", i)
		}
	}
	if err := r.cb.Flush(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("step 2 (store down): Flush = %v, want ErrUnavailable", err)
	}
	checkStats(t, "step 2 (store down)", r.cb.Stats(), ChargeStats{Held: 1, Sent: 1})
	r.setDown(false)
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 3 (store back): %v", err)
	}
	if u := r.used(t, "k", q); u != 120 {
		t.Fatalf("step 3 (store back): used %d, want 120 (debt beyond the quota of 100)", u)
	}
	checkStats(t, "step 3 (store back)", r.cb.Stats(), ChargeStats{Sent: 1, Applied: 1})
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 4 (again): %v", err)
	}
	if u := r.used(t, "k", q); u != 120 {
		t.Fatalf("step 4 (again): used %d, want 120", u)
	}
	if n := len(r.store.calls); n != 2 {
		t.Fatalf("step 4 (again): %d store calls, want 2 (the rejected one and the applied one)", n)
	}
	// New spend after the flush is a new charge, under a new request id.
	r.cb.Charge(Delta{Key: "k", Limit: q, Units: 5})
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 5 (new spend): %v", err)
	}
	if u := r.used(t, "k", q); u != 125 {
		t.Fatalf("step 5 (new spend): used %d, want 125", u)
	}
	if c := r.store.calls; c[2] == c[1] {
		t.Fatalf("step 5 (new spend): the new charge reused the request id %q", c[1])
	}
}

// TestChargeBackGoesPastARefusingMaster: a charge the store fails (one
// master of a cluster refusing writes) stays held while the charges after
// it are applied (adv42: they waited behind it); the held one is applied
// once when that master takes writes again. A breaker's rejection (one
// master's breaker open) holds that charge only: the flush goes on with
// the others (redis21: it stopped the round, other masters' charges too).
func TestChargeBackGoesPastARefusingMaster(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{Batch: 1})
	ctx := context.Background()
	q := day(r.clock.Now())
	keys := []string{"a", "b", "c"}
	r.store.refuse = map[string]bool{"a": true}
	for _, k := range keys {
		if !r.cb.Charge(Delta{Key: k, Limit: q, Units: 10}) {
			t.Fatalf("charge %s: refused", k)
		}
	}
	if err := r.cb.Flush(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("step 1 (a's master refuses): Flush = %v, want ErrUnavailable", err)
	}
	for k, want := range map[string]int64{"a": 0, "b": 10, "c": 10} {
		if u := r.used(t, k, q); u != want {
			t.Errorf("step 1 (a's master refuses): %s used %d, want %d", k, u, want)
		}
	}
	checkStats(t, "step 1 (a's master refuses)", r.cb.Stats(), ChargeStats{Held: 1, Sent: 3, Applied: 2})
	r.store.mu.Lock()
	r.store.refuse = nil
	r.store.mu.Unlock()
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 2 (back): %v", err)
	}
	for _, k := range keys {
		if u := r.used(t, k, q); u != 10 {
			t.Errorf("step 2 (back): %s used %d, want 10", k, u)
		}
	}
	checkStats(t, "step 2 (back)", r.cb.Stats(), ChargeStats{Sent: 3, Applied: 3})

	for _, k := range keys {
		r.cb.Charge(Delta{Key: k, Limit: q, Units: 1})
	}
	r.store.mu.Lock()
	r.store.reject = map[string]bool{"a": true}
	r.store.mu.Unlock()
	if err := r.cb.Flush(ctx); !errors.Is(err, ErrNotSent) {
		t.Fatalf("step 3 (a's breaker open): Flush = %v, want ErrNotSent", err)
	}
	for k, want := range map[string]int64{"a": 10, "b": 11, "c": 11} {
		if u := r.used(t, k, q); u != want {
			t.Errorf("step 3 (a's breaker open): %s used %d, want %d: only a's charge waits", k, u, want)
		}
	}
	checkStats(t, "step 3 (a's breaker open)", r.cb.Stats(), ChargeStats{Held: 1, Sent: 6, Applied: 5})
	r.store.mu.Lock()
	r.store.reject = nil
	r.store.mu.Unlock()
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 4 (a's breaker closed): %v", err)
	}
	if u := r.used(t, "a", q); u != 11 {
		t.Errorf("step 4 (a's breaker closed): a used %d, want 11", u)
	}
}

// TestChargeBackLostReplyChargesOnce: a charge applied whose reply was lost
// is retried under its request id, and the store applies it once.
func TestChargeBackLostReplyChargesOnce(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{})
	ctx := context.Background()
	q := day(r.clock.Now())
	r.cb.Charge(Delta{Key: "k", Limit: q, Units: 30})
	r.loseNext(1)
	if err := r.cb.Flush(ctx); err == nil {
		t.Fatal("step 1 (reply lost): Flush = nil, want the timeout")
	}
	r.clock.Add(time.Minute)
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 2 (retry): %v", err)
	}
	if u := r.used(t, "k", q); u != 30 {
		t.Fatalf("step 2 (retry): used %d, want 30 (applied once)", u)
	}
	if c := r.store.calls; len(c) != 2 || c[0] != c[1] {
		t.Fatalf("step 2 (retry): calls %q, want the same request id twice", c)
	}
	checkStats(t, "step 2 (retry)", r.cb.Stats(), ChargeStats{Sent: 1, Applied: 1})
}

// TestChargeBackPeriodEndedDropped: a charge whose quota window has ended
// before the store is back is dropped and counted, never moved into the
// next window.
func TestChargeBackPeriodEndedDropped(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{})
	ctx := context.Background()
	q := day(r.clock.Now())
	r.setDown(true)
	r.cb.Charge(Delta{Key: "k", Limit: q, Units: 30})
	r.cb.Flush(ctx)
	r.clock.Add(14 * time.Hour) // past midnight: tomorrow's window
	r.setDown(false)
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 1 (next day): %v", err)
	}
	next := day(r.clock.Now())
	if u := r.used(t, "k", next); u != 0 {
		t.Fatalf("step 1 (next day): today's used %d, want 0", u)
	}
	want := ChargeStats{Sent: 1}
	want.Dropped[DropPeriodEnded] = 1
	checkStats(t, "step 1 (next day)", r.cb.Stats(), want)
}

// TestChargeBackExpired: a charge whose send may have been applied is
// retried under its id for MaxHold only; a charge never seen by the store
// is held however long.
func TestChargeBackExpired(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{MaxHold: 9 * time.Minute})
	ctx := context.Background()
	q := day(r.clock.Now())
	r.cb.Charge(Delta{Key: "k", Limit: q, Units: 30})
	r.setDown(true)
	r.cb.Flush(ctx)
	r.clock.Add(20 * time.Minute) // never sent: still held
	if s := r.cb.Stats(); s.Held != 1 {
		t.Fatalf("step 1 (20 minutes unsent): %+v, want held", s)
	}
	r.setDown(false)
	r.loseNext(1)
	r.cb.Flush(ctx) // applied, reply lost: the hold starts
	r.clock.Add(9 * time.Minute)
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatalf("step 2 (9 minutes after the lost reply): %v", err)
	}
	want := ChargeStats{Sent: 1}
	want.Dropped[DropExpired] = 1
	checkStats(t, "step 2 (9 minutes after the lost reply)", r.cb.Stats(), want)
	if n := len(r.store.calls); n != 2 {
		t.Fatalf("step 2: %d store calls, want 2 (no retry past MaxHold)", n)
	}
}

// TestChargeBackBounds: MaxHeld pairs at most (a pair already held takes
// more units); token buckets, in-flight limits and zero units are not
// charged; charges go in batches of Batch deltas, each its own id.
func TestChargeBackBounds(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{MaxHeld: 3, Batch: 2})
	ctx := context.Background()
	q := day(r.clock.Now())
	for i := range 4 {
		r.cb.Charge(Delta{Key: fmt.Sprint("k", i), Limit: q, Units: 10})
	}
	if !r.cb.Charge(Delta{Key: "k0", Limit: q, Units: 1}) {
		t.Fatal("step 1: a held pair refused more units")
	}
	for _, d := range []Delta{
		{Key: "tb", Limit: Limit{Capacity: 10, Rate: 1, Per: time.Second}, Units: 1},
		{Key: "slots", Limit: Slots(2, time.Minute), Units: 1},
		{Key: "zero", Limit: q, Units: 0},
		{Key: "window without its start", Limit: Limit{Capacity: 10, Per: time.Minute, Algorithm: FixedWindow}, Units: 1},
	} {
		if r.cb.Charge(d) {
			t.Fatalf("step 2: %q charged", d.Key)
		}
	}
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := ChargeStats{Sent: 3, Applied: 3}
	want.Dropped[DropFull] = 1
	checkStats(t, "step 3", r.cb.Stats(), want)
	if n := len(r.store.calls); n != 2 {
		t.Fatalf("step 3: %d charges, want 2 (3 deltas, 2 a batch)", n)
	}
	if u := r.used(t, "k0", q); u != 11 {
		t.Fatalf("step 3: k0 used %d, want 11", u)
	}
}

// TestChargeBackWindows: a window counter's spend lands in the window it
// was spent in: a sliding window's previous window still counts, a fixed
// window's ended one is dropped.
func TestChargeBackWindows(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{})
	ctx := context.Background()
	start := r.clock.Now().Truncate(time.Minute)
	sliding := Limit{Capacity: 100, Per: time.Minute, Algorithm: SlidingWindow, WindowStart: start}
	fixed := Limit{Capacity: 100, Per: time.Minute, Algorithm: FixedWindow, WindowStart: start}
	r.cb.Charge(Delta{Key: "s", Limit: sliding, Units: 50})
	r.cb.Charge(Delta{Key: "f", Limit: fixed, Units: 50})
	r.clock.Add(time.Minute) // the next window
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := ChargeStats{Sent: 1, Applied: 1}
	want.Dropped[DropPeriodEnded] = 1
	checkStats(t, "step 1 (next window)", r.cb.Stats(), want)
	take := func(key string, l Limit) Status {
		l.WindowStart = time.Time{}
		d, err := r.store.Memory.Take(ctx, "", []Item{{Key: key, Limit: l}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Buckets[0]
	}
	if st := take("s", sliding); st.Remaining != 50 {
		t.Fatalf("step 2: sliding window remaining %d at the start of the next window, want 50 (the previous window's 50 weigh in full)", st.Remaining)
	}
	if st := take("f", fixed); st.Remaining != 100 {
		t.Fatalf("step 2: fixed window remaining %d, want 100 (the ended window's spend is not moved)", st.Remaining)
	}
}

// TestChargeBackConcurrent: charges from many goroutines while flushes
// run are each applied exactly once (go test -race).
func TestChargeBackConcurrent(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{Batch: 3})
	ctx := context.Background()
	q := day(r.clock.Now())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.cb.Charge(Delta{Key: fmt.Sprint("k", (g+i)%5), Limit: q, Units: 1})
				if i%50 == 0 {
					r.cb.Flush(ctx)
				}
			}
		}()
	}
	wg.Wait()
	if err := r.cb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var total int64
	for k := range 5 {
		total += r.used(t, fmt.Sprint("k", k), Quota(10000, q.WindowStart, q.WindowEnd))
	}
	if total != 1600 {
		t.Fatalf("charged %d units in all, want 1600", total)
	}
	if r.cb.Owes() {
		t.Fatalf("still held: %+v", r.cb.Stats())
	}
}

// refusingStore is a Memory whose Reconcile fails, unapplied, for a charge
// with a delta on a key of refuse: the reply of one cluster master that
// refuses writes (OOM), as a Redis store gives it, before any Guarded.
type refusingStore struct {
	*Memory
	refuse map[string]bool
}

func (s *refusingStore) Reconcile(ctx context.Context, id string, deltas []Delta) error {
	if slices.ContainsFunc(deltas, func(d Delta) bool { return s.refuse[d.Key] }) {
		return errors.New("OOM command not allowed when used memory > 'maxmemory'")
	}
	return s.Memory.Reconcile(ctx, id, deltas)
}

// TestChargeBackFlushDoesNotOpenTheBreaker: one master refusing writes
// must not let the fallback's charge-back open a Guarded store's breaker
// (which sends every request to the fallback, and refuses the fail-closed
// limits, healthy masters' keys included). Flush goes past each failed
// charge (adv42), so five charges on refused keys and three on healthy
// ones made five failures in eight calls, MinCalls 3: the breaker opened
// at the first Flush. A charge's failure is now left out of the breaker's
// counts (withBackground); the healthy charges are applied, the refused
// ones held through six flushes (each after a successful call, as the app
// flushes) and applied once the master takes writes.
func TestChargeBackFlushDoesNotOpenTheBreaker(t *testing.T) {
	clock := &chargeClock{t: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	mem := NewMemory(MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { mem.Close() })
	st := &refusingStore{Memory: mem, refuse: map[string]bool{}}
	g := NewGuarded(st, GuardOptions{MinCalls: 3, FailureRatio: 0.5, Window: time.Hour, OpenFor: time.Hour})
	cb, err := NewChargeBack(ChargeOptions{Store: g, Now: clock.Now, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	q := day(clock.Now())
	used := func(key string) int64 {
		d, err := mem.Take(context.Background(), "", []Item{{Key: key, Limit: q}})
		if err != nil {
			t.Fatal(err)
		}
		return q.Capacity - d.Buckets[0].Remaining
	}
	var keys []string
	for i := range 5 {
		k := fmt.Sprintf("refused%d", i)
		st.refuse[k] = true
		keys = append(keys, k)
	}
	keys = append(keys, "healthy0", "healthy1", "healthy2")
	for _, k := range keys {
		if !cb.Charge(Delta{Key: k, Limit: q, Units: 10}) {
			t.Fatalf("charge %s: refused", k)
		}
	}
	ctx := context.Background()
	for round := range 6 {
		if err := cb.Flush(ctx); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("round %d: Flush = %v, want nil or ErrUnavailable", round, err)
		}
		if s := g.State(); s != BreakerClosed {
			t.Fatalf("round %d: the charge-back opened the breaker (%v)", round, s)
		}
		// A call that succeeds, as the app's gate (lastFailed) waits for
		// before the next Flush.
		if _, err := g.Take(ctx, "", []Item{{Key: "probe", Limit: q}}); err != nil {
			t.Fatalf("round %d: probe take: %v", round, err)
		}
	}
	for _, k := range keys {
		want := int64(10)
		if st.refuse[k] {
			want = 0
		}
		if u := used(k); u != want {
			t.Errorf("after 6 rounds, master refusing: %s used %d, want %d", k, u, want)
		}
	}
	clear(st.refuse)
	if err := cb.Flush(ctx); err != nil {
		t.Fatalf("master back: %v", err)
	}
	for _, k := range keys {
		if u := used(k); u != 10 {
			t.Errorf("master back: %s used %d, want 10", k, u)
		}
	}
	checkStats(t, "master back", cb.Stats(), ChargeStats{Sent: 8, Applied: 8})
}

// routedChargeStore is a chargeStore whose keys live on master "m-" + the
// key's first letter (a MasterRouter, as a Guarded store over a cluster).
type routedChargeStore struct{ *chargeStore }

func (s routedChargeStore) MasterOf(key string) string { return "m-" + key[:1] }

// TestChargeBackChargesPerMaster: over a store that names each key's
// master, a charge holds one master's buckets, so that a master whose
// breaker rejects its charge (open) holds back only its own buckets, not
// the other masters' that a charge of mixed buckets would carry with them.
func TestChargeBackChargesPerMaster(t *testing.T) {
	r := newChargeRig(t, ChargeOptions{})
	cb, err := NewChargeBack(ChargeOptions{Store: routedChargeStore{r.store}, Now: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := day(r.clock.Now())
	keys := []string{"a1", "b1", "a2", "b2", "a3"}
	for _, k := range keys {
		cb.Charge(Delta{Key: k, Limit: q, Units: 7})
	}
	r.store.mu.Lock()
	r.store.reject = map[string]bool{"a2": true}
	r.store.mu.Unlock()
	if err := cb.Flush(ctx); !errors.Is(err, ErrNotSent) {
		t.Fatalf("step 1 (m-a's breaker open): Flush = %v, want ErrNotSent", err)
	}
	for k, want := range map[string]int64{"a1": 0, "a2": 0, "a3": 0, "b1": 7, "b2": 7} {
		if u := r.used(t, k, q); u != want {
			t.Errorf("step 1 (m-a's breaker open): %s used %d, want %d", k, u, want)
		}
	}
	if n := len(r.store.calls); n != 2 {
		t.Errorf("step 1: %d charges sent, want 2 (one per master)", n)
	}
	r.store.mu.Lock()
	r.store.reject = nil
	r.store.mu.Unlock()
	if err := cb.Flush(ctx); err != nil {
		t.Fatalf("step 2 (m-a back): %v", err)
	}
	for _, k := range keys {
		if u := r.used(t, k, q); u != 7 {
			t.Errorf("step 2 (m-a back): %s used %d, want 7", k, u)
		}
	}
}
