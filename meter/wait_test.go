package meter

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/fakeclock"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// counting is a Store that counts its takes.
type counting struct {
	bucket.Store
	takes atomic.Int64
}

func (c *counting) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, id, items)
}

// waitBench is a meter with waiting queues on a manual clock.
type waitBench struct {
	t     *testing.T
	clock *fakeclock.Clock
	store *counting
	meter *Meter
	waits *Waits
	pol   *policy.Policy
	alice policy.Principal
	n     atomic.Int64
}

func newWaitBench(t *testing.T, limits string, perBucket int) *waitBench {
	t.Helper()
	c, err := config.Parse([]byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: alice, tenant: acme, plan: free}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
` + limits))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := pol.Identify("sk-a")
	clock := fakeclock.New(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	mem := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { mem.Close() })
	waits, err := NewWaits(WaitsOptions{PerBucket: perBucket, After: clock.After, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	b := &waitBench{t: t, clock: clock, store: &counting{Store: mem}, waits: waits, pol: pol, alice: alice}
	b.meter, err = New(Options{Store: b.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now, Waits: waits})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *waitBench) request(w Watcher) Request {
	return Request{ID: "r" + strconv.FormatInt(b.n.Add(1), 10), Principal: b.alice, Policy: b.pol, Flavor: spec.FlavorOpenAI,
		Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true, Estimate: spec.Usage{InputTokens: 10, OutputTokens: 10}, Watch: w}
}

// admitAsync admits a request on its own goroutine.
func (b *waitBench) admitAsync(w Watcher) <-chan *Exchange {
	c := make(chan *Exchange, 1)
	r := b.request(w)
	go func() { c <- b.meter.Admit(r) }()
	return c
}

// until polls cond for at most 10s of progress.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 10000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

const rps = "  - {name: rps, scope: key, unit: requests, rate: 1, per: 1s, burst: 1, on_limit: wait, max_wait: 3s}\n"

// Waiters are admitted in arrival order, and only the head of a queue
// calls the store: the ones behind it make no store call until their turn.
func TestWaitFIFOOneStoreCallPerHead(t *testing.T) {
	b := newWaitBench(t, rps, 8)
	if x := b.meter.Admit(b.request(nil)); x.Verdict() != Admitted || x.Held() {
		t.Fatalf("first: %v held=%v", x.Verdict(), x.Held())
	}
	head := b.admitAsync(nil)
	until(t, "the head sleeps", func() bool { return b.waits.Len() == 1 && b.clock.Timers() == 1 })
	var behind []<-chan *Exchange
	for i := range 3 {
		behind = append(behind, b.admitAsync(nil))
		until(t, "queued", func() bool { return b.waits.Len() == 2+i })
	}
	if n := b.store.takes.Load(); n != 2 {
		t.Fatalf("%d store calls, want 2: the first request's and the head's; those behind it wait without one", n)
	}
	for range 5 { // time passing short of the head's wait costs nothing
		b.clock.Advance(100 * time.Millisecond)
	}
	if n := b.store.takes.Load(); n != 2 {
		t.Fatalf("%d store calls after time passed, want 2", n)
	}
	b.clock.Advance(500 * time.Millisecond)
	if x := <-head; x.Verdict() != Admitted || x.Waited() != time.Second {
		t.Fatalf("head: %v after %v, want admitted after 1s", x.Verdict(), x.Waited())
	}
	until(t, "the next is the head, sleeping", func() bool {
		return b.waits.Len() == 3 && b.clock.Timers() == 3 && b.store.takes.Load() >= 4
	})
	if n := b.store.takes.Load(); n != 4 {
		t.Fatalf("%d store calls, want 4: the head's retry and the next head's take", n)
	}
	for i, c := range behind[:2] {
		b.clock.Advance(time.Second)
		x := <-c
		if want := time.Duration(i+2) * time.Second; x.Verdict() != Admitted || x.Waited() != want {
			t.Fatalf("waiter %d: %v after %v, want admitted after %v", i, x.Verdict(), x.Waited(), want)
		}
		if i > 0 {
			continue // at 3s the last waiter's deadline comes too
		}
		until(t, "the next is the head, sleeping", func() bool { return b.clock.Timers() == 2 && b.store.takes.Load() >= 6 })
		for j, d := range behind[i+1:] {
			select {
			case x := <-d:
				t.Fatalf("waiter %d answered out of order (%v) before waiter %d", i+1+j, x.Verdict(), i)
			default:
			}
		}
	}
	// The last arrived at 0 with max_wait 3s: at 3s, its turn or its
	// deadline, the bucket is empty again with 1s to wait: it is refused.
	x := <-behind[2]
	// (Its retry is 1s when the head took first, 1ms when it read the
	// bucket just before.)
	if x.Verdict() != Denied || x.Waited() != 3*time.Second || x.RetryAfter() <= 0 || x.RetryAfter() > time.Second {
		t.Fatalf("last: %v after %v retry %v, want denied after 3s, retry in (0, 1s]", x.Verdict(), x.Waited(), x.RetryAfter())
	}

	if b.waits.Len() != 0 {
		t.Fatalf("%d left waiting", b.waits.Len())
	}
}

// gone is a Watcher whose client leaves when its channel is closed.
type gone struct {
	c       chan struct{}
	stopped atomic.Bool
}

func (g *gone) Watch() (<-chan struct{}, func()) { return g.c, func() { g.stopped.Store(true) } }

// A waiter whose client leaves is dropped with nothing taken, and the one
// behind it becomes the head.
func TestWaitClientLeaves(t *testing.T) {
	b := newWaitBench(t, rps, 8)
	b.meter.Admit(b.request(nil))
	g := &gone{c: make(chan struct{})}
	head := b.admitAsync(g)
	until(t, "the head sleeps", func() bool { return b.waits.Len() == 1 && b.clock.Timers() == 1 })
	next := b.admitAsync(nil)
	until(t, "queued", func() bool { return b.waits.Len() == 2 })
	close(g.c)
	if x := <-head; x.Verdict() != Left || len(x.Rules()) != 0 || !g.stopped.Load() {
		t.Fatalf("departed: %v rules=%d stopped=%v, want left, holding nothing, unwatched", x.Verdict(), len(x.Rules()), g.stopped.Load())
	}
	until(t, "the next is the head", func() bool { return b.waits.Len() == 1 && b.clock.Timers() == 1 })
	b.clock.Advance(time.Second)
	if x := <-next; x.Verdict() != Admitted {
		t.Fatalf("next: %v", x.Verdict())
	}
}

// A full queue refuses at once: a request that finds it full takes once
// and is denied without waiting.
func TestWaitQueueFull(t *testing.T) {
	b := newWaitBench(t, rps, 1)
	b.meter.Admit(b.request(nil))
	head := b.admitAsync(nil)
	until(t, "the head sleeps", func() bool { return b.waits.Len() == 1 })
	if x := b.meter.Admit(b.request(nil)); x.Verdict() != Denied || x.Held() {
		t.Fatalf("full: %v held=%v, want denied at once", x.Verdict(), x.Held())
	}
	b.clock.Advance(time.Second)
	if x := <-head; x.Verdict() != Admitted {
		t.Fatalf("head: %v", x.Verdict())
	}
}

// A limit that does not wait refuses at once even beside one that does;
// a too-large request never waits.
func TestWaitOnlyWhenEveryDenyingLimitWaits(t *testing.T) {
	b := newWaitBench(t, rps+"  - {name: rpm, scope: user, unit: requests, rate: 1, per: 1s, burst: 1}\n"+
		"  - {name: tpm, scope: key, unit: tokens, rate: 100, per: 1s, burst: 100, on_limit: wait}\n", 8)
	b.meter.Admit(b.request(nil))
	if x := b.meter.Admit(b.request(nil)); x.Verdict() != Denied || x.Held() {
		t.Fatalf("denied by a limit that fails: %v held=%v", x.Verdict(), x.Held())
	}
	r := b.request(nil)
	r.Estimate.OutputTokens = 500
	if x := b.meter.Admit(r); x.Verdict() != TooLarge || x.Held() {
		t.Fatalf("too large: %v held=%v", x.Verdict(), x.Held())
	}
}
