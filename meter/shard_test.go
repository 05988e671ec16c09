package meter

import (
	"context"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// shardLevels reads what each shard of a sharded rule of alice holds now.
func (tl *timeline) shardLevels(rule string) []int64 {
	tl.t.Helper()
	for i := range tl.policy.Rules() {
		r := &tl.policy.Rules()[i]
		if r.Name != rule {
			continue
		}
		keys := r.ShardKeys(tl.alice, "")
		items := make([]bucket.Item, r.Shards)
		for j := range items {
			items[j] = bucket.Item{Key: keys.Key(j), Limit: bucket.ShardLimit(r.LimitAt(tl.clock.Now()), r.Shards, j)}
		}
		d, err := tl.mem.Take(context.Background(), "", items)
		if err != nil {
			tl.t.Fatal(err)
		}
		out := make([]int64, len(items))
		for j, b := range d.Buckets {
			out[j] = b.Remaining
		}
		return out
	}
	tl.t.Fatalf("no rule %q", rule)
	return nil
}

func total(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// A sharded limit: a reservation is taken from one shard (several when it
// is larger than a shard), the Applied rule describes the whole limit, and
// settlement reconciles the shards taken from; a request larger than the
// whole limit is too large, naming the whole capacity.
func TestTimelineShardedLimit(t *testing.T) {
	tl := newTimeline(t, `  - {name: all-tpm, scope: global, unit: tokens, rate: 4, per: 24h, burst: 4000, shards: 4}
`)
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v", x.Verdict())
	}
	a := x.Rules()[0]
	if len(a.Taken) != 1 || a.Taken[0].Cost != 500 || a.Taken[0].Limit.Capacity != 1000 || a.Limit.Capacity != 4000 ||
		a.Key != "llmguard:{global}:all-tpm" {
		t.Fatalf("applied %+v, want 500 taken from one shard of 1000, the whole limit of 4000", a)
	}
	// One shard seen, holding 1000 before the take: 4 × 1000 − 500.
	if a.Status.Remaining != 3500 {
		t.Fatalf("whole limit remaining %d, want 3500", a.Status.Remaining)
	}
	if got := tl.shardLevels("all-tpm"); total(got) != 3500 {
		t.Fatalf("shards %v after admission, want 3500 in all", got)
	}
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200})
	got := tl.shardLevels("all-tpm")
	if total(got) != 3850 {
		t.Fatalf("shards %v after settlement, want 4000 − 150 used", got)
	}
	for _, l := range got {
		if l != 1000 && l != 850 {
			t.Fatalf("shards %v: the refund went elsewhere than the shard taken from", got)
		}
	}

	big := tl.admit(1000, 1500) // 2500 > a shard's 1000: three shards at once
	if big.Verdict() != Admitted || len(big.Rules()[0].Taken) != 3 {
		t.Fatalf("2500 tokens: %v, taken from %+v, want admitted from 3 shards", big.Verdict(), big.Rules()[0].Taken)
	}
	if got := tl.shardLevels("all-tpm"); total(got) != 3850-2500 {
		t.Fatalf("shards %v, want %d in all", got, 3850-2500)
	}
	big.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	if got := tl.shardLevels("all-tpm"); total(got) != 3850 {
		t.Fatalf("shards %v after the refund, want 3850 back: each shard refunded what it paid", got)
	}

	huge := tl.admit(3000, 1001)
	if huge.Verdict() != TooLarge || huge.Rules()[0].Limit.Capacity != 4000 || huge.Rules()[0].Reserved != 4001 {
		t.Fatalf("4001 tokens: %v, %+v, want too large for the whole 4000", huge.Verdict(), huge.Rules()[0])
	}
	if got := tl.shardLevels("all-tpm"); total(got) != 3850 {
		t.Fatalf("shards %v after a refusal, want 3850: a refusal spends nothing", got)
	}
}

// While the store is unavailable, a sharded fail-open limit is served by
// the per-node fallback as one bucket (a node's share of the whole limit),
// and reconciled there.
func TestTimelineShardedFallback(t *testing.T) {
	tl := newTimeline(t, `  - {name: all-tpm, scope: global, unit: tokens, rate: 4, per: 24h, burst: 4000, shards: 4}
`)
	tl.store.down.Store(true)
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted || x.Outcome(200) != OutcomeFailOpen || x.Rules()[0].Taken != nil {
		t.Fatalf("verdict %v outcome %s taken %+v, want fail-open from the fallback's one bucket", x.Verdict(), x.Outcome(200), x.Rules()[0].Taken)
	}
	if got := tl.level(tl.fallback, "all-tpm"); got != 2000-500 {
		t.Fatalf("fallback bucket %d, want a node's 2000 less 500", got)
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 502})
	if got := tl.level(tl.fallback, "all-tpm"); got != 2000 {
		t.Fatalf("fallback bucket %d after the refund, want 2000", got)
	}
}

// cachedDenial is a store whose every take is a denial answered from a
// deny cache by item deny.
type cachedDenial struct {
	bucket.Store
	deny int
}

func (c cachedDenial) Take(_ context.Context, _ string, items []bucket.Item) (bucket.Decision, error) {
	d := bucket.Decision{DeniedBy: c.deny, Cached: true, RetryAfter: 40 * time.Millisecond, Buckets: make([]bucket.Status, len(items))}
	d.Buckets[c.deny] = bucket.Status{Remaining: 3, Reset: time.Second}
	return d, nil
}

// A denial answered from the deny cache is judged by the denying rule
// alone: the only rule whose status is known is the one the headers and the
// message describe.
func TestTimelineCachedDenial(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
  - {name: acme-tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m}
`)
	m, err := New(Options{Store: cachedDenial{Store: tl.mem, deny: 1}, Now: tl.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	x := m.Admit(Request{ID: "c", Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI, Model: "gpt-4o-mini",
		Weighed: true, Estimate: spec.Usage{InputTokens: 10, OutputTokens: 10}})
	if x.Verdict() != Denied || len(x.Rules()) != 1 || x.DeniedBy() != 0 || x.Rules()[0].Rule.Name != "acme-tpm" ||
		x.Rules()[0].Status.Remaining != 3 || !x.Rules()[0].Denied || x.RetryAfter() != 40*time.Millisecond {
		t.Fatalf("verdict %v by %d, rules %+v, retry %v: want denied by acme-tpm alone", x.Verdict(), x.DeniedBy(), x.Rules(), x.RetryAfter())
	}
	if x.Rules()[0].Rule.Scope != policy.ScopeTenant {
		t.Fatalf("rule %+v", x.Rules()[0].Rule)
	}
}
