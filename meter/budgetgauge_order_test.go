package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// admit admits a gpt-4o-mini chat of user reserving in input and out
// output tokens, and returns it unsettled.
func (r *gaugeRig) admit(user string, in, out int64) *Exchange {
	r.t.Helper()
	r.n++
	x := r.meter.Admit(Request{ID: "req-" + user + "-" + string(rune('a'+r.n)), Principal: r.callers[user], Policy: r.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
	if x.Verdict() != Admitted {
		r.t.Fatalf("request %d of %s: %v, want admitted", r.n, user, x.Verdict())
	}
	return x
}

// settle settles x with the reported usage (in, used).
func settleUsage(x *Exchange, in, used int64) {
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: in, OutputTokens: used}, Status: 200})
}

// spent is the ledger's spend so far, in µUSD.
func (r *gaugeRig) spent() int64 {
	var n int64
	for _, rec := range r.ledger.all() {
		n += rec.CostMicroUSD
	}
	return n
}

// Requests settle in another order than they were admitted (trial27: a
// stream admitted before a run of short calls settled after them). The
// gauge is the ledger's spend once all have settled, whichever settles
// last: before, the last settlement's level at admission set it, which
// missed what settled in between (a stream settling last: 159 µUSD read
// for 639 spent) or kept a reservation that had settled lower (1,590 read
// for 399).
func TestBudgetGaugeSettlementOrder(t *testing.T) {
	const limits = `  - {name: acme-daily-usd, scope: tenant, unit: usd, quota: 0.01, period: day}
`
	// Each request reserves 150 + 1,200 µUSD (1,000 input tokens, 2,000
	// output at $0.15 / $0.60 per million).
	for _, c := range []struct {
		name  string
		steps func(r *gaugeRig)
	}{
		{"stream settles after two later calls", func(r *gaugeRig) {
			stream := r.admit("alice", 1000, 2000)
			for range 2 {
				settleUsage(r.admit("bob", 1000, 2000), 1000, 150) // 240 µUSD each
			}
			settleUsage(stream, 1000, 15) // 159 µUSD
		}},
		{"a later call settles after an earlier one", func(r *gaugeRig) {
			first := r.admit("alice", 1000, 2000)
			second := r.admit("bob", 1000, 2000)
			settleUsage(first, 1000, 15)
			settleUsage(second, 1000, 150)
		}},
		{"interleaved", func(r *gaugeRig) {
			a := r.admit("alice", 1000, 2000)
			b := r.admit("bob", 1000, 2000)
			settleUsage(r.admit("alice", 1000, 2000), 1000, 100)
			settleUsage(b, 1000, 10)
			c := r.admit("bob", 1000, 2000)
			settleUsage(a, 1000, 300)
			settleUsage(c, 1000, 50)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newGaugeRig(t, limits)
			c.steps(r)
			spent := r.spent()
			if got, want := r.gauge("llmguard_quota_used", "acme-daily-usd"), float64(spent)/1e6; !near(got, want) {
				t.Errorf("quota_used %v USD, want the ledger's %v once every request settled", got, want)
			}
		})
	}
}

// FuzzBudgetGaugeSettlementOrder admits and settles requests of two users
// under a tenant quota in any order (each byte pair one step: admit, or
// settle the in-flight request it picks with the output it names), then
// settles the rest: the gauge must read the ledger's spend.
func FuzzBudgetGaugeSettlementOrder(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 0, 3, 9, 2, 200})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 5, 1, 7, 250, 3, 0})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 64 {
			steps = steps[:64]
		}
		r := newGaugeRig(t, `  - {name: acme-daily-usd, scope: tenant, unit: usd, quota: 1, period: day}
`)
		var open []*Exchange
		for i := 0; i+1 < len(steps); i += 2 {
			op, arg := steps[i], int64(steps[i+1])
			if op%2 == 0 || len(open) == 0 {
				open = append(open, r.admit([]string{"alice", "bob"}[op/2%2], 1000, 2000))
				continue
			}
			k := int(op/2) % len(open)
			settleUsage(open[k], 1000, arg*7)
			open = append(open[:k], open[k+1:]...)
		}
		for i, x := range open {
			settleUsage(x, 1000, int64(i*13%2000))
		}
		if spent := r.spent(); spent > 0 {
			if got, want := r.gauge("llmguard_quota_used", "acme-daily-usd"), float64(spent)/1e6; !near(got, want) {
				t.Errorf("quota_used %v USD, want the ledger's %v", got, want)
			}
		}
	})
}
