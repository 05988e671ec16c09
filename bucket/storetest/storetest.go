package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// NewStore builds a fresh store for one timeline. The store must read its
// time from clock (see Clock.OnSet) and be cleaned up through t.Cleanup.
type NewStore func(t *testing.T, clock *Clock) bucket.Store

// Start is the instant every timeline's offsets count from.
var Start = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// Run runs every timeline of the contract, token buckets' then quotas', as
// a subtest of t, one after the other (a Redis store's clock may be shared), each on a store from newStore
// with a clock reading Start, and its keys and request ids under a prefix of
// its own.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	all := append(timelines[:len(timelines):len(timelines)], quotaTimelines...)
	all = append(all, slotTimelines...)
	all = append(all, windowTimelines...)
	for _, tl := range append(all, voidTimelines...) {
		t.Run(tl.name, func(t *testing.T) {
			clock := NewClock(Start)
			store := newStore(t, clock)
			run(t, store, clock, prefix(tl.name), tl.steps)
		})
	}
}

// timeline is one story told to a store: named steps on fixed instants.
type timeline struct {
	name  string
	steps []step
}

// step is one call at one instant. It is a Void of voids when voids is
// non-nil, a Reconcile when deltas is non-nil, else a Take of items (with
// request as its request id, when set). Keys and request ids are short
// names; the runner prefixes them.
type step struct {
	name string
	// at is the clock for this step as an offset from Start; steps may go
	// back in time.
	at time.Duration

	items []bucket.Item
	want  bucket.Decision // of the Take
	// windows, when set, is the Take's Decision.Windows as offsets from
	// Start (the window each window counter counted in).
	windows []time.Duration
	// voided is set when the Take must fail with an error wrapping
	// bucket.ErrVoided (its request id was voided first; nothing changes).
	voided bool

	request string // request id of the Reconcile, the Void or the Take
	deltas  []bucket.Delta
	voids   []bucket.Item // the items of the Void: the take's

	// invalid is set when the call must fail with an error wrapping
	// bucket.ErrInvalid (and change nothing).
	invalid bool
}

var runs atomic.Uint64

// prefix returns a key prefix no other timeline or run shares. The braces are
// a Redis Cluster hash tag: one timeline's keys land in one slot.
func prefix(name string) string {
	name = strings.NewReplacer("{", "", "}", "", " ", "_").Replace(name)
	return fmt.Sprintf("storetest:{%s-%d-%d}:", name, time.Now().UnixNano(), runs.Add(1))
}

func run(t *testing.T, store bucket.Store, clock *Clock, prefix string, steps []step) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		clock.Set(Start.Add(s.at))
		where := fmt.Sprintf("step %d (%s) at +%v", i+1, s.name, s.at)

		var err error
		request := ""
		if s.request != "" {
			request = prefix + s.request
		}
		switch {
		case s.voids != nil:
			items := make([]bucket.Item, len(s.voids))
			for j, it := range s.voids {
				it.Key = prefix + it.Key
				items[j] = it
			}
			err = store.Void(ctx, request, items)
		case s.deltas != nil:
			deltas := make([]bucket.Delta, len(s.deltas))
			for j, d := range s.deltas {
				d.Key = prefix + d.Key
				deltas[j] = d
			}
			err = store.Reconcile(ctx, prefix+s.request, deltas)
		default:
			items := make([]bucket.Item, len(s.items))
			for j, it := range s.items {
				it.Key = prefix + it.Key
				items[j] = it
			}
			var got bucket.Decision
			got, err = store.Take(ctx, request, items)
			if err == nil && !s.invalid && !s.voided && !sameDecision(got, s.want) {
				t.Errorf("%s: Take decided\n\t%+v\nwant\t%+v", where, got, s.want)
			}
			if err == nil && s.windows != nil && !sameWindows(got.Windows, s.windows) {
				t.Errorf("%s: Take counted in windows %v, want %v after Start", where, got.Windows, s.windows)
			}
		}

		switch {
		case s.invalid && !errors.Is(err, bucket.ErrInvalid):
			t.Errorf("%s: err = %v, want one wrapping bucket.ErrInvalid", where, err)
		case s.voided && !errors.Is(err, bucket.ErrVoided):
			t.Errorf("%s: err = %v, want one wrapping bucket.ErrVoided", where, err)
		case !s.invalid && !s.voided && err != nil:
			t.Errorf("%s: unexpected error: %v", where, err)
		}
	}
}

func sameDecision(a, b bucket.Decision) bool {
	if a.Allowed != b.Allowed || a.DeniedBy != b.DeniedBy || a.TooLarge != b.TooLarge ||
		a.RetryAfter != b.RetryAfter || len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Buckets {
		if a.Buckets[i] != b.Buckets[i] {
			return false
		}
	}
	return true
}

// sameWindows reports whether got are the instants Start + want.
func sameWindows(got []time.Time, want []time.Duration) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !got[i].Equal(Start.Add(want[i])) {
			return false
		}
	}
	return true
}

// Helpers that keep the tables to one line a decision.

func allowed(buckets ...bucket.Status) bucket.Decision {
	return bucket.Decision{Allowed: true, DeniedBy: -1, Buckets: buckets}
}

func denied(by int, retryAfter time.Duration, buckets ...bucket.Status) bucket.Decision {
	return bucket.Decision{DeniedBy: by, RetryAfter: retryAfter, Buckets: buckets}
}

func tooLarge(by int, buckets ...bucket.Status) bucket.Decision {
	return bucket.Decision{DeniedBy: by, TooLarge: true, Buckets: buckets}
}

func status(remaining int64, reset time.Duration) bucket.Status {
	return bucket.Status{Remaining: remaining, Reset: reset}
}
