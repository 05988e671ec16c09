package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// A sharded rule whose shards are on masters that are down but one: every
// request is taken from the live shard (a try on a dead shard gives back
// what its live part took, then moves on), so the fail-closed sharded rule
// never refuses and the fallback judges nothing; the shards and the
// tenant's bucket hold exactly what was settled.
func TestPartialShardMovesToALiveShard(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1, per: 24h, burst: 100000, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4, per: 24h, burst: 40000, shards: 4, on_failure: closed}
`)
	hd.down, hd.more = "{global:0}", []string{"{global:1}", "{global:2}"}
	const n = 12
	for i := range n {
		x := tl.admit(100, 400)
		if x.Verdict() != Admitted || x.FromFallback() {
			t.Fatalf("request %d: %v (from the fallback %v, closed by %v), want admitted by the store", i, x.Verdict(), x.FromFallback(), x.ClosedBy())
		}
		a := x.Rules()[1]
		if a.Fallback || len(a.Taken) != 1 || a.Taken[0].Key != "llmguard:{global:3}:all-tpm" || a.Taken[0].Cost != 500 {
			t.Fatalf("request %d: all-tpm %+v, want its 500 taken from the live shard 3", i, a)
		}
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200})
	}
	if got := tl.shardLevels("all-tpm"); got[0] != 10000 || got[1] != 10000 || got[2] != 10000 || got[3] != 10000-n*150 {
		t.Fatalf("shards hold %v, want the dead ones full and shard 3 at 10000 − %d×150", got, n)
	}
	if got := tl.level(tl.mem, "tpm"); got != 100000-n*150 {
		t.Fatalf("tpm holds %d, want 100000 − %d×150: each try's give-back landed, nothing charged twice", got, n)
	}
	if hd.voids.Load() == 0 {
		t.Fatal("no try met a dead shard: the test proved nothing")
	}
	if f := tl.failures("all-tpm", OutcomeFailClosed) + tl.failures("all-tpm", OutcomeFailOpen) + tl.failures("tpm", OutcomeFailOpen); f != 0 {
		t.Fatalf("%v failure decisions, want none: every limit was judged by the store", f)
	}
}

// Every shard of a sharded rule down: the rule alone follows its
// on_failure. Fail-open: the fallback judges it over the whole limit and
// the tenant's rule is taken in the store; fail-closed: 503 and the
// tenant's take given back.
func TestPartialShardAllDown(t *testing.T) {
	for _, tc := range []struct {
		name, onFailure string
	}{{"open", "open"}, {"closed", "closed"}} {
		t.Run(tc.name, func(t *testing.T) {
			tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1, per: 24h, burst: 100000, on_failure: open}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4, per: 24h, burst: 40000, shards: 4, on_failure: `+tc.onFailure+`}
`)
			hd.down = "{global:"
			x := tl.admit(100, 400)
			if tc.onFailure == "closed" {
				if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "all-tpm" {
					t.Fatalf("%v closed by %v, want fail-closed by all-tpm", x.Verdict(), x.ClosedBy())
				}
				if got := tl.level(tl.mem, "tpm"); got != 100000 {
					t.Fatalf("tpm holds %d, want 100000: a refusal spends nothing", got)
				}
				if got := tl.failures("all-tpm", OutcomeFailClosed); got != 1 {
					t.Fatalf("all-tpm fail_closed decisions %v, want 1", got)
				}
				return
			}
			if x.Verdict() != Admitted || !x.FromFallback() {
				t.Fatalf("%v (from the fallback %v), want admitted, all-tpm by the fallback", x.Verdict(), x.FromFallback())
			}
			if r := x.Rules(); r[0].Fallback || !r[1].Fallback || r[1].Taken != nil {
				t.Fatalf("rules %+v, want tpm by the store, all-tpm by the fallback (whole limit)", r)
			}
			x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 50}, Status: 200})
			if got := tl.level(tl.mem, "tpm"); got != 100000-150 {
				t.Fatalf("tpm holds %d in the store, want 100000 − 150", got)
			}
			if got := tl.level(tl.fallback, "all-tpm"); got != 20000-150 {
				t.Fatalf("the fallback's all-tpm holds %d, want its share 20000 − 150", got)
			}
			if got, none := tl.failures("all-tpm", OutcomeFailOpen), tl.failures("tpm", OutcomeFailOpen); got != 1 || none != 0 {
				t.Fatalf("fail_open decisions all-tpm %v, tpm %v; want 1 and 0", got, none)
			}
		})
	}
}

// A fail-closed rule on a dead master refuses the request, and what the
// live shards of a sharded rule took is given back: a refusal spends
// nothing, on any shard.
func TestPartialShardGivenBackOnRefusal(t *testing.T) {
	tl, hd := newHalfDown(t, `  - {name: tpm, scope: tenant, unit: tokens, rate: 1, per: 24h, burst: 100000, on_failure: closed}
  - {name: all-tpm, scope: global, unit: tokens, rate: 4, per: 24h, burst: 40000, shards: 4, on_failure: open}
`)
	hd.down = "{acme}"
	for i := range 4 {
		x := tl.admit(100, 400)
		if x.Verdict() != FailClosed || x.ClosedBy() == nil || x.ClosedBy().Name != "tpm" {
			t.Fatalf("request %d: %v closed by %v, want fail-closed by tpm", i, x.Verdict(), x.ClosedBy())
		}
	}
	if got := tl.shardLevels("all-tpm"); total(got) != 40000 {
		t.Fatalf("shards hold %v, want 40000 in all: the refused requests' shards given back", got)
	}
	if hd.voids.Load() != 4 {
		t.Fatalf("%d voids, want 4: one per refused request", hd.voids.Load())
	}
}
