package meter

import (
	"math"
	"slices"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/reserve"
)

// Output is how a request's output reservation (Request.Estimate's
// OutputTokens) was made, and whether admission may lower the request's
// output maximum. The zero value: the request named its maximum, for one
// completion, and it is never lowered.
type Output struct {
	// Defaulted: the request names no output maximum, so the reservation
	// is the model's fixed default times Choices. With Options.Outputs set,
	// admission replaces it by the learned reservation once the model has
	// enough samples, and the output the upstream reports for the request
	// teaches the learner.
	Defaulted bool
	// Choices is how many completions the reservation covers (chat's n);
	// 0 means 1.
	Choices int64
	// Ceiling is the model's documented maximum output per completion, in
	// tokens (models[].max_output_tokens; 0: unknown): a learned
	// reservation never exceeds it.
	Ceiling int64
	// Cappable: the transport can lower the request's output maximum in the
	// body it forwards (chat completions, Responses, Anthropic Messages),
	// so a limit with cap_output may admit it with a lower maximum instead
	// of denying it.
	Cappable bool
	// Pinnable: the transport can write an output maximum into a body
	// that names none (Options.PinOutputs) but not lower one it names
	// (legacy completions' max_tokens: cap_output is off there). Cappable
	// implies it.
	Pinnable bool
	// MinMax is the smallest output maximum per completion the endpoint
	// accepts, in tokens (Responses: 16); 0 means 1.
	MinMax int64
}

// outputState is what admission did to a request's output reservation.
type outputState struct {
	key       string // the learner's sketch key; "" when the request does not learn
	capped    int64  // the lowered maximum per completion, tokens; 0: not lowered
	requested int64  // the maximum per completion before it was lowered, tokens
	learned   bool   // the reservation is the learned one
	pinned    bool   // the reservation is to be written as the request's maximum (Options.PinOutputs); beside learned, so an Exchange is no larger
}

// OutputLearned reports whether the request's output reservation is the
// learned one (output_reservation.learn) rather than the fixed default or
// the request's own maximum.
func (x *Exchange) OutputLearned() bool { return x.out.learned }

// OutputCapped reports whether admission lowered the request's output
// maximum to fit a cap_output limit: to is the new maximum per completion,
// from the one reserved before (the request's own, or its default), both
// in tokens. The transport must send to upstream in the flavor's own field.
func (x *Exchange) OutputCapped() (to, from int64, ok bool) {
	return x.out.capped, x.out.requested, x.out.capped > 0
}

// OutputPinned reports whether the transport must write the request's
// output reservation into it as its maximum (Options.PinOutputs: the
// request named none, and its kind's maximum can be written): per is
// that maximum per completion, in tokens, the reservation admission
// took after learning and any cap_output lowering (then the same as
// OutputCapped's to). ok is false for a request that was not admitted.
func (x *Exchange) OutputPinned() (per int64, ok bool) {
	if !x.out.pinned || x.verdict != Admitted {
		return 0, false
	}
	return x.req.Estimate.OutputTokens / max(x.req.Output.Choices, 1), true
}

// pinOutput marks a request that names no output maximum, of a kind whose
// maximum the transport can write (Output.Cappable or Output.Pinnable),
// to have its reservation written as its maximum (Options.PinOutputs),
// raising a reservation per completion below
// the endpoint's least maximum (Responses: 16 tokens) to that least
// maximum: the maximum written is what the buckets are charged for.
func (x *Exchange) pinOutput() {
	r := &x.req // not a copy (360 bytes); read before x.req.Estimate is written
	if !x.m.opt.PinOutputs || !r.Output.Defaulted || !r.Output.Cappable && !r.Output.Pinnable || !r.Weighed || r.PerImage > 0 {
		return
	}
	n := max(r.Output.Choices, 1)
	if lo := max(r.Output.MinMax, 1); r.Estimate.OutputTokens/n < lo {
		x.req.Estimate.OutputTokens = mulSat(lo, n)
	}
	x.out.pinned = true
}

// learnOutput replaces a defaulted output reservation by the learned one
// when the meter learns outputs and the model has enough samples.
func (x *Exchange) learnOutput() {
	l, r := x.m.opt.Outputs, &x.req // not a copy (360 bytes); read before x.req.Estimate is written
	if l == nil || !r.Output.Defaulted || !r.Weighed || r.PerImage > 0 {
		return
	}
	x.out.key = reserve.Key(x.quote.Label, x.quote.Priced)
	n := max(r.Output.Choices, 1)
	per, learned := l.Reservation(x.out.key, r.Estimate.OutputTokens/n, r.Output.Ceiling)
	if learned {
		x.req.Estimate.OutputTokens = mulSat(per, n)
		x.out.learned = true
	}
}

// observeOutput teaches the learner the output a settled request that
// named no maximum really produced, per completion (never one whose
// maximum admission lowered: its output was cut by llmguard, not chosen by
// the model).
//
// A pinned request (OutputPinned) whose output per completion reached its
// pin was cut there: the model wanted at least the pin, and how much more
// is unknown. It is taught as pinCutFactor times its pin. Taught as the
// pin itself, as before, a learned reservation under pin could follow
// outputs down but never rise past itself: after a workload grew, its
// answers stayed cut (39% of them in TestSimulatePinnedLearnerRises,
// against 5% by design at p95). Now, while more than 1 − quantile of
// answers are cut, the quantile read lands among the doubled samples and
// the reservation doubles; once fewer are cut it falls back to the
// quantile of what the model really wrote, as old samples fade. The
// reservation stays within [floor, min(cap, the model's maximum)].
func (x *Exchange) observeOutput(output int64) {
	if x.out.key == "" || x.out.capped > 0 || x.m.opt.Outputs == nil {
		return
	}
	n := max(x.req.Output.Choices, 1)
	per := (max(output, 0) + n - 1) / n
	if pin, ok := x.OutputPinned(); ok && per >= pin {
		per = mulSat(pin, pinCutFactor)
	}
	x.m.opt.Outputs.Observe(x.out.key, per)
}

// pinCutFactor is how many times its pin an answer cut at its pin teaches
// the learned reservation (observeOutput): 2, so that a reservation too low
// for the traffic doubles per round of cut answers rather than creeping.
const pinCutFactor = 2

// capOutput admits, with a lower output maximum, a request that its limits
// denied, when every limit that could not pay allows it (cap_output) and
// what they have left covers the input plus at least the largest of their
// cap_output_min (and the endpoint's MinMax) per completion. It finds the
// largest maximum per completion that every bucket's remaining units, as
// the denial reported them, would pay, and takes again with that cost: the
// second take is the same two-phase, all-or-nothing take, so a bucket
// another request drained meanwhile denies it and nothing is spent past a
// limit. When the second take is denied too, the first denial is what the
// caller is told. The first denial spent nothing.
func (x *Exchange) capOutput(rules []*policy.Rule) {
	r := x.req
	if !r.Output.Cappable || !r.Weighed || r.PerImage > 0 {
		return
	}
	n := max(r.Output.Choices, 1)
	per := r.Estimate.OutputTokens / n
	lo := max(r.Output.MinMax, 1)
	for _, a := range x.rules {
		if a.Reserved <= a.Status.Remaining {
			continue
		}
		if !a.Rule.CapOutput {
			return // a limit that does not lower outputs denies as it did
		}
		lo = max(lo, a.Rule.CapOutputMin)
	}
	if lo >= per {
		return
	}
	fits := func(out int64) bool {
		u := x.reservation(r.Estimate.InputTokens, mulSat(out, n))
		for _, a := range x.rules {
			if x.units(a.Rule, &u) > a.Status.Remaining {
				return false
			}
		}
		return true
	}
	if !fits(lo) {
		return
	}
	hi := per // exclusive: the full request was denied
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	// Keep the first denial, to answer with should the second take fail.
	first := struct {
		verdict  Verdict
		rules    []Applied
		decision bucket.Decision
		fallback bool
	}{x.verdict, slices.Clone(x.rules), x.decision, x.fallback}
	first.decision.Buckets = slices.Clone(first.decision.Buckets)

	x.req.Estimate.OutputTokens = mulSat(lo, n)
	x.verdict, x.fallback, x.unlimited, x.closedBy = Admitted, false, false, nil
	x.take(rules)
	if x.verdict == Admitted {
		x.out.capped, x.out.requested = lo, per
		return
	}
	if x.verdict == Denied || x.verdict == TooLarge {
		x.req.Estimate.OutputTokens = r.Estimate.OutputTokens
		x.verdict, x.rules, x.decision, x.fallback = first.verdict, first.rules, first.decision, first.fallback
	}
}

// mulSat is a × b for non-negative a and b, saturating at MaxInt64.
func mulSat(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
