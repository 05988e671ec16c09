package meter

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/spec"
)

// An in-flight limit: a slot per admitted request, given back at
// settlement whatever the outcome (reported usage, an upstream error with
// none, usage unknown), so that the third request waits for any of the
// first two; a denial by another limit holds no slot; the gauge follows.
func TestTimelineInFlight(t *testing.T) {
	tl := newTimeline(t, `  - {name: two, scope: user, unit: concurrent, max: 2}
  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`)
	gauge := func() float64 { return testutil.ToFloat64(tl.meter.Metrics().inFlight.WithLabelValues("two")) }
	a, b := tl.admit(10, 10), tl.admit(10, 10)
	if a.Verdict() != Admitted || b.Verdict() != Admitted {
		t.Fatalf("verdicts %v %v, want both admitted", a.Verdict(), b.Verdict())
	}
	if got := tl.level(tl.mem, "two"); got != 0 || gauge() != 2 {
		t.Fatalf("two in flight: %d slots left, gauge %v; want 0 and 2", got, gauge())
	}
	c := tl.admit(10, 10)
	if c.Verdict() != Denied || c.Rules()[c.DeniedBy()].Rule.Name != "two" || c.RetryAfter() != time.Second {
		t.Fatalf("third: %v by %d after %v, want denied by two after 1s", c.Verdict(), c.DeniedBy(), c.RetryAfter())
	}
	for i, s := range []Settlement{
		{Source: spec.SourceRefund, Status: 502},
		{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 5, OutputTokens: 5}, Status: 200},
		{Source: spec.SourceReserved, Status: 200},
	} {
		x := a
		if i == 1 {
			x = b
		}
		if i == 2 {
			x = tl.admit(10, 10)
			if x.Verdict() != Admitted {
				t.Fatalf("step %d: %v, want admitted", i, x.Verdict())
			}
		}
		x.Settle(s)
		if got := tl.level(tl.mem, "two"); got != int64(i+1) && i < 2 {
			t.Fatalf("step %d (%v): %d slots free, want %d", i, s.Source, got, i+1)
		}
	}
	if got := tl.level(tl.mem, "two"); got != 2 || gauge() != 0 {
		t.Fatalf("all settled: %d slots free, gauge %v; want 2 and 0", got, gauge())
	}
	// A denial by the token limit holds no slot.
	if d := tl.admit(10, 5000); d.Verdict() != TooLarge {
		t.Fatalf("a request above the token burst: %v, want too_large", d.Verdict())
	}
	if got := tl.level(tl.mem, "two"); got != 2 {
		t.Fatalf("after a denial: %d slots free, want 2", got)
	}
}

// A shadow limit never changes whether the real limits admit: over random
// sequences of requests, settlements and waits, the verdicts and the real
// buckets' levels are the same with and without shadow limits (tighter than
// the real ones, of every kind); a request the real limits deny spends
// nothing from a shadow bucket; a shadow bucket that would deny takes
// nothing.
func TestShadowNeverChangesAdmission(t *testing.T) {
	const real = `  - {name: rpm, scope: user, unit: requests, rate: 20, per: 1m, burst: 5}
  - {name: tpm, scope: user, unit: tokens, rate: 3000, per: 1m}
  - {name: inflight, scope: user, unit: concurrent, max: 4}
`
	const shadow = `  - {name: s-rpm, scope: user, unit: requests, rate: 10, per: 1m, burst: 2, shadow: true}
  - {name: s-tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m, shadow: true}
  - {name: s-day, scope: user, unit: tokens, quota: 4000, period: day, shadow: true}
  - {name: s-inflight, scope: user, unit: concurrent, max: 1, shadow: true}
`
	for seed := uint64(1); seed <= 20; seed++ {
		plain, both := newTimeline(t, real), newTimeline(t, real+shadow)
		rng := rand.New(rand.NewPCG(seed, 7))
		var open [2][]*Exchange
		wouldDeny, denied := 0, 0
		for step := 0; step < 200; step++ {
			switch op := rng.IntN(10); {
			case op < 5:
				in, out := rng.Int64N(800), rng.Int64N(800)
				before := map[string]int64{}
				for _, r := range []string{"s-rpm", "s-tpm", "s-day", "s-inflight"} {
					before[r] = both.level(both.mem, r)
				}
				x, y := plain.admit(in, out), both.admit(in, out)
				if x.Verdict() != y.Verdict() || x.DeniedBy() != y.DeniedBy() || x.RetryAfter() != y.RetryAfter() {
					t.Fatalf("seed %d step %d: without shadows %v by %d after %v, with %v by %d after %v",
						seed, step, x.Verdict(), x.DeniedBy(), x.RetryAfter(), y.Verdict(), y.DeniedBy(), y.RetryAfter())
				}
				if y.Verdict() != Admitted {
					denied++
					if len(y.Shadow()) != 0 {
						t.Fatalf("seed %d step %d: a denied request has shadow rules %v", seed, step, y.Shadow())
					}
				}
				for _, a := range y.Shadow() {
					if a.Denied {
						wouldDeny++
					}
				}
				for r, lv := range before {
					taken := false
					for _, a := range y.Shadow() {
						taken = taken || a.Rule.Name == r && !a.Untaken && a.Reserved > 0
					}
					if got := both.level(both.mem, r); !taken && got != lv {
						t.Fatalf("seed %d step %d: shadow %s went from %d to %d without being taken (verdict %v)", seed, step, r, lv, got, y.Verdict())
					}
				}
				if x.Verdict() == Admitted {
					open[0], open[1] = append(open[0], x), append(open[1], y)
				}
			case op < 8 && len(open[0]) > 0:
				i := rng.IntN(len(open[0]))
				s := Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: rng.Int64N(900), OutputTokens: rng.Int64N(900)}, Status: 200}
				if rng.IntN(4) == 0 {
					s = Settlement{Source: spec.SourceRefund, Status: 502}
				}
				open[0][i].Settle(s)
				open[1][i].Settle(s)
				for k := range open {
					open[k] = append(open[k][:i], open[k][i+1:]...)
				}
			default:
				d := time.Duration(rng.IntN(5000)) * time.Millisecond
				plain.advance(d)
				both.advance(d)
			}
			for _, r := range []string{"rpm", "tpm", "inflight"} {
				if p, b := plain.level(plain.mem, r), both.level(both.mem, r); p != b {
					t.Fatalf("seed %d step %d: real bucket %s holds %d without shadows, %d with", seed, step, r, p, b)
				}
			}
		}
		if wouldDeny == 0 || denied == 0 {
			t.Fatalf("seed %d: %d would-deny shadow verdicts and %d real denials: the sequence tests nothing", seed, wouldDeny, denied)
		}
	}
}
