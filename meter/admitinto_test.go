package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// TestAdmitIntoIsAdmit: an exchange admitted into the caller's storage
// (AdmitInto) is the caller's, and is judged, takes and settles as one
// Admit returns: the same verdicts at the same levels, on the same
// timeline, the reservation taken and reconciled, a denial spending
// nothing.
func TestAdmitIntoIsAdmit(t *testing.T) {
	const limits = `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`
	byAdmit, byInto := newTimeline(t, limits), newTimeline(t, limits)
	into := func(tl *timeline, in, out int64) *Exchange {
		tl.n++
		var held struct {
			before int
			x      Exchange
		}
		x := tl.meter.AdmitInto(&held.x, &Request{ID: "req-" + string(rune('a'+tl.n)), Principal: tl.alice, Policy: tl.policy,
			Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
			Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
		if x != &held.x {
			t.Fatal("AdmitInto did not return the exchange it was given")
		}
		return x
	}
	steps := []struct {
		name    string
		in, out int64
		used    int64 // settled usage (input + output), -1: not settled
	}{
		{name: "admitted", in: 100, out: 400, used: 150},
		{name: "admitted again", in: 100, out: 600, used: -1},
		{name: "denied (900 > 150 left)", in: 100, out: 800, used: -1},
		{name: "a small one admitted", in: 10, out: 20, used: 30},
	}
	for i, s := range steps {
		a, b := byAdmit.admit(s.in, s.out), into(byInto, s.in, s.out)
		if a.Verdict() != b.Verdict() || a.RetryAfter() != b.RetryAfter() || len(a.Rules()) != len(b.Rules()) {
			t.Fatalf("step %d (%s): AdmitInto %v (retry %v, %d rules), Admit %v (retry %v, %d rules)",
				i, s.name, b.Verdict(), b.RetryAfter(), len(b.Rules()), a.Verdict(), a.RetryAfter(), len(a.Rules()))
		}
		for j := range a.Rules() {
			if ra, rb := a.Rules()[j], b.Rules()[j]; ra.Reserved != rb.Reserved || ra.Status.Remaining != rb.Status.Remaining {
				t.Fatalf("step %d (%s): rule %d reserved %d remaining %d, Admit's %d and %d",
					i, s.name, j, rb.Reserved, rb.Status.Remaining, ra.Reserved, ra.Status.Remaining)
			}
		}
		if s.used >= 0 {
			u := Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: s.used / 5, OutputTokens: s.used - s.used/5}, Status: 200}
			if !a.Settle(u) || !b.Settle(u) {
				t.Fatalf("step %d (%s): a first Settle did nothing", i, s.name)
			}
		}
		if la, lb := byAdmit.level(byAdmit.mem, "tpm"), byInto.level(byInto.mem, "tpm"); la != lb {
			t.Fatalf("step %d (%s): %d left after AdmitInto, %d after Admit", i, s.name, lb, la)
		}
	}
	if got := byInto.level(byInto.mem, "tpm"); got != 1000-150-700-30 {
		t.Fatalf("%d left, want 1000 − 150 − 700 − 30", got)
	}
}

// TestAdmitIntoRefusesAUsedExchange: an exchange is never admitted twice
// (a store may keep what its first admission gave it).
func TestAdmitIntoRefusesAUsedExchange(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`)
	var x Exchange
	r := Request{ID: "once", Principal: tl.alice, Policy: tl.policy, Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions",
		Model: "gpt-4o-mini", Weighed: true, Estimate: spec.Usage{InputTokens: 10, OutputTokens: 10}}
	tl.meter.AdmitInto(&x, &r)
	defer func() {
		if recover() == nil {
			t.Error("a second AdmitInto of the same exchange did not panic")
		}
	}()
	r.ID = "twice"
	tl.meter.AdmitInto(&x, &r)
}
