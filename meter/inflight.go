package meter

import (
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// settledUnits is what rule a of a settled request really cost, in its
// unit: nothing for an upstream error without usage (SourceRefund) and
// for an in-flight limit (its slot is given back however the request
// ended: the delta −1 releases it); the reservation when the usage is
// unknown; else the usage's units.
func (x *Exchange) settledUnits(a *Applied, src spec.Source, known bool, actual spec.Usage) int64 {
	switch {
	case a.Rule.Unit == policy.UnitConcurrent, src == spec.SourceRefund:
		return 0
	case !known && !x.req.Weighed && a.Rule.Unit == policy.UnitUSD:
		return 0 // the hold of an unmetered call: what it billed, if said, comes from billedFloor
	case !known:
		return a.Reserved // nothing better known: keep the reservation
	default:
		return x.units(a.Rule, &actual)
	}
}

// settledUnitsPriced is settledUnits for Settle, which has priced actual
// already: cost is x.quote.Price.MicroUSD(actual), in micro-USD. A dollar rule
// of a weighed request whose usage is known costs exactly that (its units
// are the price of the usage, policy.Rule.Units), so it is not priced a
// second time: one 128-bit division and eight products less a request,
// about 210 instructions (BenchmarkProxyPath/llmguard under callgrind).
func (x *Exchange) settledUnitsPriced(a *Applied, src spec.Source, known bool, actual spec.Usage, cost int64) int64 {
	if known && src != spec.SourceRefund && a.Rule.Unit == policy.UnitUSD && x.req.Weighed && x.req.PerImage == 0 {
		return cost
	}
	return x.settledUnits(a, src, known, actual)
}

// billedFloor is units, what dollar rule a settled at, raised to billed,
// what the upstream says it billed the request (Settlement.BilledMicroUSD),
// in micro-USD, when the usage is not known: a reservation that stands, a
// per-image generation's price, a refund, or a request that is not
// weighed (whose dollar rules nothing else prices). A known usage's price
// holds the bill already (policy.Price.MicroUSD). Rules in other units
// keep units.
func (x *Exchange) billedFloor(a *Applied, known bool, units, billed int64) int64 {
	if !known && billed > 0 && a.Rule.Unit == policy.UnitUSD {
		return max(units, billed)
	}
	return units
}

// held counts the slots an admitted request holds in in_flight_requests,
// real and shadow limits alike.
func (m *Metrics) held(x *Exchange) { m.slots(x, 1) }

// released uncounts them, once the request is settled.
func (m *Metrics) released(x *Exchange) { m.slots(x, -1) }

func (m *Metrics) slots(x *Exchange, by float64) {
	if m == nil {
		return
	}
	for _, rules := range [2][]Applied{x.rules, x.shadow} {
		for i := range rules {
			if a := &rules[i]; a.Rule.Unit == policy.UnitConcurrent && a.Reserved > 0 && !a.Untaken {
				m.inFlight.WithLabelValues(a.Rule.Name).Add(by)
			}
		}
	}
}
