package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// The breaker's rule (GuardOptions): open when at least FailureRatio of the
// calls that ended in the last Window failed, once MinCalls ended; or at
// once after MinCalls failures in a row. gobreaker reads the wall clock, so
// these tests decide by counts within a window of an hour, except
// TestBreakerWindowForgets and TestBreakerRunOutlivesWindow, which only
// wait (a lower bound: a slower machine waits longer, never less).

// calls runs pattern through g, one Take per character: 'S' a success, 'F'
// a failure of the store (refused), 'V' a take the store answers with
// ErrVoided. It returns the index of the call after which the breaker was
// first open, or -1.
func calls(t *testing.T, f *flakyStore, g *bucket.Guarded, pattern string) int {
	t.Helper()
	ctx := context.Background()
	for i, c := range pattern {
		if g.State() == bucket.BreakerOpen {
			t.Fatalf("call %d of %q: the breaker is already open", i, pattern)
		}
		f.down.Store(c == 'F')
		id := ""
		if c == 'V' {
			id = fmt.Sprint("voided-", i)
			if err := f.mem.Void(ctx, id, item("k", 1)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := g.Take(ctx, id, item("k", 1))
		switch {
		case c == 'S' && err != nil, c == 'F' && !errors.Is(err, bucket.ErrUnavailable),
			c == 'V' && (!errors.Is(err, bucket.ErrVoided) || errors.Is(err, bucket.ErrUnavailable)):
			t.Fatalf("call %d (%c) of %q: %v", i, c, pattern, err)
		}
		if g.State() == bucket.BreakerOpen {
			return i
		}
	}
	return -1
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// ratioGuard returns a Guarded over a flaky store, configured by o with a
// window of an hour unless o says otherwise. A success takes 1 unit of
// guardLimit; once it is used up, a success is a denial, which is a
// success too.
func ratioGuard(t *testing.T, o bucket.GuardOptions) (*flakyStore, *bucket.Guarded) {
	f := newFlaky(t)
	if o.Window == 0 {
		o.Window = time.Hour
	}
	o.OpenFor = time.Hour
	// These tests decide by counts: no call may fail by its deadline,
	// which the default (50 ms) would on a loaded machine.
	o.Timeout, o.ReconcileTimeout = time.Hour, time.Hour
	return f, bucket.NewGuarded(f, o)
}

// TestBreakerIgnoresIsolatedFailures: a healthy store on a busy host fails
// a call now and then, and a burst of a few at worst; none of it opens the
// breaker. A quarter of 1,000 calls failing, and runs of 19 failures (one
// short of MinCalls), leave it closed.
func TestBreakerIgnoresIsolatedFailures(t *testing.T) {
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5})
	pattern := repeat("SSSF", 250) + "S" + repeat("F", 19) + "S" + repeat("F", 19) + repeat("S", 10)
	if at := calls(t, f, g, pattern); at >= 0 {
		t.Fatalf("breaker opened at call %d: isolated failures must not open it", at)
	}
	st := g.Stats()
	if st.Opened != 0 || st.Calls[bucket.OpTake][bucket.ResultFailed] != 250+38 {
		t.Errorf("stats %+v: want 288 failures and the breaker never opened", st)
	}
}

// TestBreakerOpensOnRatio: the ratio of at least MinCalls calls failing
// opens it, on the failure that reaches the ratio, long before MinCalls
// failures in a row; just below the ratio it stays closed however long the
// pattern.
func TestBreakerOpensOnRatio(t *testing.T) {
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5})
	if at := calls(t, f, g, repeat("SF", 30)); at != 19 {
		t.Errorf("S,F alternating at a ratio of 0.5 opened after call %d, want 19 (the 10th failure of 20 calls)", at)
	}
	f, g = ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.6})
	if at := calls(t, f, g, repeat("SF", 40)); at >= 0 {
		t.Errorf("S,F alternating at a ratio of 0.6 opened after call %d: half is below 0.6", at)
	}
	f, g = ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.6})
	if at := calls(t, f, g, repeat("SFF", 20)); at != 19 {
		t.Errorf("S,F,F repeated at a ratio of 0.6 opened after call %d, want 19 (13 failures of 20 calls)", at)
	}
	if at := calls(t, f, g, ""); at >= 0 || g.Stats().Opened != 1 {
		t.Errorf("opened %d times, want once", g.Stats().Opened)
	}
}

// TestBreakerFastPathForADeadStore: whatever the window held, MinCalls
// failures in a row open it; a fresh breaker opens once MinCalls calls
// have all failed.
func TestBreakerFastPathForADeadStore(t *testing.T) {
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5})
	if at := calls(t, f, g, repeat("S", 90)+repeat("F", 30)); at != 90+19 {
		t.Errorf("90 successes then failures: opened after call %d, want %d (the 20th failure in a row)", at, 90+19)
	}
	f2, g2 := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5})
	if at := calls(t, f2, g2, repeat("F", 30)); at != 19 {
		t.Errorf("a store dead from the start: opened after call %d, want 19", at)
	}
	// Rejected calls were never sent: no Void is needed for them.
	_, err := g2.Take(context.Background(), "r", item("k", 1))
	if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, bucket.ErrNotSent) || bucket.MayHaveApplied(err) {
		t.Errorf("take while open: %v; want ErrUnavailable and ErrNotSent, not MayHaveApplied", err)
	}
}

// TestBreakerVoidedIsASuccess: a take the store refuses as voided is the
// store's answer: it counts as a success (V,F alternating is half failures,
// below a ratio of 0.6) and comes back as is, without ErrUnavailable.
func TestBreakerVoidedIsASuccess(t *testing.T) {
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 4, FailureRatio: 0.6})
	if at := calls(t, f, g, repeat("VF", 40)); at >= 0 {
		t.Errorf("V,F alternating opened the breaker after call %d: ErrVoided counted as a failure", at)
	}
	if ok := g.Stats().Calls[bucket.OpTake][bucket.ResultOK]; ok != 40 {
		t.Errorf("%d takes counted ok, want the 40 voided ones", ok)
	}
}

// TestBreakerWindowForgets: failures older than the window no longer
// count toward the ratio. 15 failures and a success, a wait of three
// windows, 15 more failures: never 20 calls in the window, nor 20 failures
// in a row (the success broke the run). The same without the wait opens it
// on the ratio.
func TestBreakerWindowForgets(t *testing.T) {
	const window = 50 * time.Millisecond
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5, Window: window})
	if at := calls(t, f, g, repeat("F", 15)+"S"); at >= 0 {
		t.Fatalf("opened after call %d of 16", at)
	}
	time.Sleep(3 * window)
	if at := calls(t, f, g, repeat("F", 15)); at >= 0 {
		t.Errorf("opened after call %d of the second 15: the first 15 were not forgotten", at)
	}

	f2, g2 := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5}) // a window of an hour
	if at := calls(t, f2, g2, repeat("F", 15)+"S"+repeat("F", 15)); at != 19 {
		t.Errorf("without the wait: opened after call %d, want 19 (20 calls, 19 of them failed)", at)
	}
}

// TestBreakerRunOutlivesWindow: a quiet node, sending fewer than MinCalls
// calls a window to a store that is down, still opens its breaker once
// MinCalls calls in a row have failed, however far apart: 15 failures, a
// wait of three windows, and the 5th failure after it opens it. Without
// the run kept outside the window, every request of such a node paid its
// failed call (up to store.timeout on a hung Redis) for the whole outage.
func TestBreakerRunOutlivesWindow(t *testing.T) {
	const window = 50 * time.Millisecond
	f, g := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5, Window: window})
	for range 3 {
		if at := calls(t, f, g, repeat("F", 5)); at >= 0 {
			t.Fatalf("opened after call %d of 5", at)
		}
		time.Sleep(2 * window)
	}
	if at := calls(t, f, g, repeat("F", 10)); at != 4 {
		t.Errorf("opened after call %d of the last 10, want 4 (the 20th failure in a row, over 6 windows)", at)
	}

	// ErrInvalid neither counts nor breaks the run; a success does.
	f2, g2 := ratioGuard(t, bucket.GuardOptions{MinCalls: 20, FailureRatio: 0.5, Window: window})
	if at := calls(t, f2, g2, repeat("F", 19)); at >= 0 {
		t.Fatalf("opened after call %d of 19", at)
	}
	time.Sleep(3 * window)
	if _, err := g2.Take(context.Background(), "", item("k", -1)); !errors.Is(err, bucket.ErrInvalid) {
		t.Fatalf("take of -1 units: %v, want ErrInvalid", err)
	}
	if at := calls(t, f2, g2, "SF"); at >= 0 {
		t.Errorf("opened after call %d of S,F: the success did not end the run", at)
	}
	time.Sleep(3 * window)
	if at := calls(t, f2, g2, repeat("F", 19)); at != 18 {
		t.Errorf("opened after call %d of 19, want 18 (20 failures in a row since the success)", at)
	}
}
