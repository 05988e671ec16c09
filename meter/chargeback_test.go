package meter

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/spec"
)

// charged is a Charger that keeps what it is given.
type charged struct {
	mu sync.Mutex
	ds []bucket.Delta
}

func (c *charged) Charge(d bucket.Delta) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ds = append(c.ds, d)
	return true
}

func (c *charged) take() []bucket.Delta {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.ds
	c.ds = nil
	return ds
}

// A request admitted from the fallback is charged, at settlement, what it
// settled at on each quota (the reported usage; the reservation when the
// usage is unknown), in its take's window, a sharded quota's spread over
// its shards; never on a token bucket, and nothing for a request the store
// took.
func TestTimelineFallbackSpendCharged(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 100000, per: 1m, on_failure: open}
  - {name: day, scope: user, unit: tokens, quota: 100000, period: day, on_failure: open}
  - {name: org-day, scope: global, unit: tokens, quota: 1000000, period: day, shards: 2, on_failure: open}
`)
	ch := &charged{}
	tl.meter.opt.Charges = ch
	rule := func(name string) int {
		for i, r := range tl.policy.Rules() {
			if r.Name == name {
				return i
			}
		}
		t.Fatalf("no rule %q", name)
		return -1
	}
	day := &tl.policy.Rules()[rule("day")]
	org := &tl.policy.Rules()[rule("org-day")]
	today := day.LimitAt(tl.clock.Now())

	tl.store.down.Store(true)
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted || x.Outcome(200) != OutcomeFailOpen {
		t.Fatalf("step 1: %v (%s), want admitted fail_open", x.Verdict(), x.Outcome(200))
	}
	if ds := ch.take(); len(ds) != 0 {
		t.Fatalf("step 1 (admitted): charged %+v before settlement", ds)
	}
	tl.advance(time.Minute)
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 120, OutputTokens: 31}, Status: 200})
	keys := org.ShardKeys(tl.alice, "")
	want := []bucket.Delta{
		{Key: day.Key(tl.alice), Limit: today, Units: 151},
		{Key: keys.Key(0), Limit: bucket.ShardLimit(org.LimitAt(tl.clock.Now()), 2, 0), Units: 76},
		{Key: keys.Key(1), Limit: bucket.ShardLimit(org.LimitAt(tl.clock.Now()), 2, 1), Units: 75},
	}
	if ds := ch.take(); !sameDeltas(ds, want) {
		t.Fatalf("step 2 (settled, reported):\n got %+v\nwant %+v", ds, want)
	}

	y := tl.admit(100, 400)
	y.Settle(Settlement{Source: spec.SourceReserved, Status: 200})
	if ds := ch.take(); len(ds) != 3 || ds[0].Units != 500 || ds[0].Key != day.Key(tl.alice) {
		t.Fatalf("step 3 (usage unknown): charged %+v, want the reservation of 500 on day and its shards", ds)
	}

	z := tl.admit(100, 400)
	z.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	if ds := ch.take(); len(ds) != 0 {
		t.Fatalf("step 4 (refunded): charged %+v, want nothing", ds)
	}

	tl.store.down.Store(false)
	w := tl.admit(100, 400)
	w.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 120, OutputTokens: 30}, Status: 200})
	if ds := ch.take(); len(ds) != 0 {
		t.Fatalf("step 5 (store up): charged %+v, want nothing: the store took it", ds)
	}
}

// sameDeltas compares deltas by key, units and limit, in any order.
func sameDeltas(got, want []bucket.Delta) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g bucket.Delta) bool {
			return g.Key == w.Key && g.Units == w.Units && g.Limit.Capacity == w.Limit.Capacity &&
				g.Limit.WindowStart.Equal(w.Limit.WindowStart) && g.Limit.WindowEnd.Equal(w.Limit.WindowEnd)
		}) {
			return false
		}
	}
	return true
}
