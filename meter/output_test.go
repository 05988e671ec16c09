package meter

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/reserve"
	"github.com/llmguard/llmguard/spec"
)

// admitOut asks for a gpt-4o-mini chat reserving in input and out output
// tokens, its output described by o.
func (tl *timeline) admitOut(in, out int64, o Output) *Exchange {
	tl.n++
	return tl.meter.Admit(Request{ID: fmt.Sprintf("req-%d", tl.n), Principal: tl.alice, Policy: tl.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}, Output: o})
}

var cappable = Output{Cappable: true, MinMax: 1}

// cap_output, step by step: a request whose output does not fit is
// admitted with the largest maximum that does; below cap_output_min it is
// denied and spends nothing; a limit without cap_output denies as before;
// a request that cannot be rewritten is denied.
func TestCapOutputTimeline(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m, cap_output: true, cap_output_min: 100}
  - {name: day, scope: tenant, unit: tokens, quota: 1000000, period: day}
`)
	x := tl.admitOut(100, 4000, cappable)
	to, from, ok := x.OutputCapped()
	if x.Verdict() != Admitted || !ok || to != 900 || from != 4000 {
		t.Fatalf("step 1 (lowered to fit): %v capped=%v %d from %d, want admitted at 900 from 4000", x.Verdict(), ok, to, from)
	}
	if got := tl.level(tl.mem, "tpm"); got != 0 {
		t.Fatalf("step 1: tpm holds %d, want 0 (1000 − 100 in − 900 out)", got)
	}
	if x.Rules()[0].Reserved != 1000 {
		t.Fatalf("step 1: reserved %d, want the lowered cost 1000", x.Rules()[0].Reserved)
	}
	tl.advance(9 * time.Second) // 150 back
	y := tl.admitOut(100, 4000, cappable)
	if _, _, ok := y.OutputCapped(); y.Verdict() != TooLarge || ok { // 4100 > the burst of 1000
		t.Fatalf("step 2 (150 left < 100 in + 100 min): %v capped=%v, want too_large, as without cap_output", y.Verdict(), ok)
	}
	if got := tl.level(tl.mem, "tpm"); got != 150 {
		t.Fatalf("step 2: tpm holds %d, want 150: a denial spends nothing", got)
	}
	if y.Rules()[0].Reserved != 4100 {
		t.Fatalf("step 2: the denial reports %d requested, want the first take's 4100", y.Rules()[0].Reserved)
	}
	tl.advance(51 * time.Second) // full again
	z := tl.admitOut(100, 4000, Output{})
	if z.Verdict() != TooLarge {
		t.Fatalf("step 3 (not cappable): %v, want too_large", z.Verdict())
	}
	w := tl.admitOut(100, 500, cappable)
	if _, _, ok := w.OutputCapped(); w.Verdict() != Admitted || ok {
		t.Fatalf("step 4 (fits): %v capped=%v, want admitted as asked", w.Verdict(), ok)
	}
	w.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 500}, Status: 200})
}

// A limit that cannot pay but has no cap_output denies, whatever a
// cap_output limit beside it would allow.
func TestCapOutputNeedsEveryShortLimit(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 5000, per: 1m, cap_output: true, cap_output_min: 10}
  - {name: otpm, scope: tenant, unit: output_tokens, rate: 500, per: 1m}
`)
	if x := tl.admitOut(100, 2000, cappable); x.Verdict() != TooLarge || x.DeniedBy() != 1 {
		t.Fatalf("%v by %d, want too_large by otpm (1), which does not lower outputs", x.Verdict(), x.DeniedBy())
	}
	if tl.level(tl.mem, "tpm") != 5000 || tl.level(tl.mem, "otpm") != 500 {
		t.Fatal("a denial spent")
	}
	// tpm short, otpm (no cap_output) able to pay: lowered to what tpm has.
	if x := tl.admitOut(4800, 400, cappable); x.Verdict() != Admitted {
		t.Fatalf("%v, want admitted", x.Verdict())
	} else if to, _, ok := x.OutputCapped(); !ok || to != 200 {
		t.Fatalf("capped=%v to %d, want 200 (5000 − 4800 input)", ok, to)
	}
}

// Choices: the lowered maximum is per completion; a usd limit lowers by
// price.
func TestCapOutputChoicesAndUSD(t *testing.T) {
	// $0.60 per million output tokens: 600 micro-USD buy 1,000 output tokens.
	tl := newTimeline(t, `  - {name: spend, scope: user, unit: usd, quota: 0.0006, period: day, cap_output: true, cap_output_min: 16}
`)
	x := tl.admitOut(0, 3*4096, Output{Cappable: true, Choices: 3, MinMax: 1})
	to, _, ok := x.OutputCapped()
	if x.Verdict() != Admitted || !ok || to != 333 {
		t.Fatalf("%v capped=%v to %d, want admitted at 333 per choice (1000 tokens' worth / 3 choices)", x.Verdict(), ok, to)
	}
	if got := tl.level(tl.mem, "spend"); got < 0 {
		t.Fatalf("spend holds %d: spent past the quota", got)
	}
}

// Property: over random sequences of cappable requests against a daily
// quota with cap_output (no refill), concurrent, the costs admitted never
// exceed the quota, every lowered maximum is at least cap_output_min, and a
// denial never spends.
func TestCapOutputNeverSpendsPastTheLimit(t *testing.T) {
	for seed := range uint64(8) {
		tl := newTimeline(t, `  - {name: day, scope: user, unit: tokens, quota: 50000, period: day, cap_output: true, cap_output_min: 64}
`)
		var mu sync.Mutex
		var admitted int64
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				for range 60 {
					in, out := int64(rng.IntN(800)), int64(rng.IntN(6000))
					mu.Lock()
					tl.n++
					id := fmt.Sprintf("s%d-%d", seed, tl.n)
					mu.Unlock()
					x := tl.meter.Admit(Request{ID: id, Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI,
						Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
						Estimate: spec.Usage{InputTokens: in, OutputTokens: out}, Output: cappable})
					if x.Verdict() != Admitted {
						continue
					}
					if to, _, ok := x.OutputCapped(); ok && (to < 64 || to >= out) {
						t.Errorf("seed %d: lowered %d to %d: outside [64, asked)", seed, out, to)
					}
					mu.Lock()
					admitted += x.Rules()[0].Reserved
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		left := tl.level(tl.mem, "day")
		if admitted > 50000 || left != 50000-admitted {
			t.Fatalf("seed %d: admitted %d, %d left: want admitted ≤ 50000 and left = 50000 − admitted", seed, admitted, left)
		}
	}
}

// Learned reservations: a request naming no maximum reserves the default
// until the model has MinSamples reported outputs, then their quantile;
// outputs of requests that named a maximum, or whose maximum was lowered,
// teach nothing.
func TestLearnedReservationTimeline(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 100000000, per: 1m}
`)
	l, err := reserve.New(reserve.Options{MinSamples: 5, Floor: 10, Cap: 100000})
	if err != nil {
		t.Fatal(err)
	}
	tl.meter, err = New(Options{Store: tl.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now, Outputs: l})
	if err != nil {
		t.Fatal(err)
	}
	defaulted := Output{Defaulted: true, Choices: 1}
	for i := range 5 {
		x := tl.admitOut(10, 4096, defaulted)
		if x.OutputLearned() || x.Rules()[0].Reserved != 4106 {
			t.Fatalf("sample %d: reserved %d learned=%v, want the default 4106", i, x.Rules()[0].Reserved, x.OutputLearned())
		}
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 10, OutputTokens: 300}, Status: 200})
		// Named maxima and failed answers teach nothing.
		y := tl.admitOut(10, 50, Output{})
		y.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 10, OutputTokens: 5}, Status: 200})
	}
	x := tl.admitOut(10, 4096, defaulted)
	if !x.OutputLearned() || x.Rules()[0].Reserved < 310 || x.Rules()[0].Reserved > 323 {
		t.Fatalf("after 5 samples: reserved %d learned=%v, want ≈ 10 + 300", x.Rules()[0].Reserved, x.OutputLearned())
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	// n = 4 choices: four times the learned per-choice figure; the
	// model's ceiling clamps it.
	if x := tl.admitOut(0, 4*4096, Output{Defaulted: true, Choices: 4, Ceiling: 200}); x.Rules()[0].Reserved != 800 {
		t.Fatalf("4 choices under a ceiling of 200: reserved %d, want 800", x.Rules()[0].Reserved)
	}
}

// Pinned outputs (Options.PinOutputs), step by step: a request naming no
// maximum of a kind whose maximum can be written is pinned at its
// reservation per completion, the learned one once the model has
// samples; one below the endpoint's least maximum is raised to it before
// the take, so the buckets are charged what is written; a request that
// named its maximum, or whose kind cannot be rewritten, or a meter
// without the option, pins nothing.
func TestPinnedOutputTimeline(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 100000000, per: 1m}
`)
	l, err := reserve.New(reserve.Options{MinSamples: 5, Floor: 10, Cap: 100000})
	if err != nil {
		t.Fatal(err)
	}
	tl.meter, err = New(Options{Store: tl.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now,
		Outputs: l, PinOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	pinnable := Output{Defaulted: true, Cappable: true, Choices: 1, MinMax: 1}
	for i := range 5 {
		x := tl.admitOut(10, 4096, pinnable)
		if per, ok := x.OutputPinned(); !ok || per != 4096 || x.Rules()[0].Reserved != 4106 {
			t.Fatalf("step 1.%d (the default): pinned=%v at %d, reserved %d; want pinned at 4096, reserved 4106", i, ok, per, x.Rules()[0].Reserved)
		}
		// A pinned output teaches the learner as any other.
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 10, OutputTokens: 300}, Status: 200})
	}
	x := tl.admitOut(10, 4096, pinnable)
	per, ok := x.OutputPinned()
	if !ok || !x.OutputLearned() || per < 300 || per > 313 || x.Rules()[0].Reserved != 10+per {
		t.Fatalf("step 2 (learned): pinned=%v at %d learned=%v reserved %d; want pinned at the learned ≈ 300, reserved 10 + it", ok, per, x.OutputLearned(), x.Rules()[0].Reserved)
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	// Two choices: the maximum is per completion.
	x = tl.admitOut(0, 2*4096, Output{Defaulted: true, Cappable: true, Choices: 2, MinMax: 1, Ceiling: 200})
	if per, ok := x.OutputPinned(); !ok || per != 200 || x.Rules()[0].Reserved != 400 {
		t.Fatalf("step 3 (2 choices, ceiling 200): pinned=%v at %d reserved %d; want 200 a choice, 400 reserved", ok, per, x.Rules()[0].Reserved)
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	// A reservation below the endpoint's least maximum (Responses: 16;
	// here a model's maximum of 5 clamps the learned one) is raised to
	// it, and taken so.
	x = tl.admitOut(0, 5, Output{Defaulted: true, Cappable: true, Choices: 1, MinMax: 16, Ceiling: 5})
	if per, ok := x.OutputPinned(); !ok || per != 16 || x.Rules()[0].Reserved != 16 {
		t.Fatalf("step 4 (below MinMax): pinned=%v at %d reserved %d; want 16 and 16", ok, per, x.Rules()[0].Reserved)
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	// Pinnable alone (legacy completions: written, never lowered), 3
	// choices: pinned at the learned reservation per completion, as a
	// Cappable one is.
	x = tl.admitOut(0, 3*4096, Output{Defaulted: true, Pinnable: true, Choices: 3, MinMax: 1})
	if per, ok := x.OutputPinned(); !ok || per < 300 || per > 313 || x.Rules()[0].Reserved != 3*per {
		t.Fatalf("step 4b (Pinnable, 3 choices): pinned=%v at %d reserved %d; want the learned ≈ 300 a choice, 3 × it reserved", ok, per, x.Rules()[0].Reserved)
	}
	x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	for _, o := range []struct {
		step string
		out  Output
	}{
		{"step 5 (named its maximum)", Output{Cappable: true, Choices: 1, MinMax: 1}},
		{"step 6 (cannot be rewritten: a prediction, min_tokens, an echo)", Output{Defaulted: true, Choices: 1, MinMax: 1}},
	} {
		x := tl.admitOut(10, 4096, o.out)
		if _, ok := x.OutputPinned(); ok || x.Verdict() != Admitted {
			t.Fatalf("%s: %v pinned=%v; want admitted, not pinned", o.step, x.Verdict(), ok)
		}
		x.Settle(Settlement{Source: spec.SourceRefund, Status: 500})
	}
	// Without the option, nothing is pinned.
	tl.meter, err = New(Options{Store: tl.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if x := tl.admitOut(10, 4096, pinnable); x.Verdict() != Admitted {
		t.Fatalf("step 7: %v", x.Verdict())
	} else if _, ok := x.OutputPinned(); ok {
		t.Fatal("step 7 (option off): pinned")
	}
}

// A pinned request that its limit denies pins nothing: OutputPinned is
// for a request that is forwarded.
func TestPinnedOutputDeniedPinsNothing(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`)
	var err error
	tl.meter, err = New(Options{Store: tl.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: tl.clock.Now, PinOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	x := tl.admitOut(10, 4096, Output{Defaulted: true, Cappable: true, Choices: 1, MinMax: 1})
	if _, ok := x.OutputPinned(); x.Verdict() == Admitted || ok {
		t.Fatalf("%v pinned=%v; want denied, not pinned", x.Verdict(), ok)
	}
}
