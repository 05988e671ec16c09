package meter

import (
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// quoteIn is the request's model priced in the service tier the value
// tier names (policy.Policy.Quote: a request's service_tier as sent, or
// the tier an answer says it was served at), with the request's audio and
// geography premiums (policy.Quote.ForAudio, ForGeo).
func (x *Exchange) quoteIn(tier string) policy.Quote {
	r := &x.req
	q := r.Policy.Quote(r.Model, tier)
	if r.Audio && r.Weighed {
		q = q.ForAudio()
	}
	if r.GeoPinned {
		q = q.ForGeo()
	}
	return q
}

// servedAt is the cost, in micro-USD, of actual, the usage of x's answer,
// given cost, its price in the tier x was admitted in, and served, the
// tier the answer says it was served at (spec.Usage.ServiceTier, not ""):
// the dearer of the two. An OpenAI request that names no tier (or "auto")
// is served at its project's default tier, which may be priority, billed
// at about twice the standard rates (gpt-5: $2.50 and $20 per million
// input and output tokens against $1.25 and $10,
// https://openai.com/api-priority-processing/): settled at
// default_service_tier's price, such an answer cost half its bill. When
// the served tier costs more, x's quote becomes that tier's, so that every
// usd rule, the ledger record and Quote settle at it. An answer naming a
// tier that costs no more (the same one; standard or flex for a priority
// request) changes nothing: a lenient or hostile upstream cannot lower the
// charge below the price of the tier the request asked for. A tier
// llmguard does not know, spec.TierUnread among them, is priority's
// (policy.Policy.TierOf). A dearer tier the price table does not price
// (models."<model>".priority unset) is charged at the dearest tier it
// prices for the model (dearestPriced: the standard tier's, for a flex
// request served at priority, not flex's), counted in
// served_tier_unpriced_total{model,tier} and logged (warn, naming the
// config key to set) once per model and tier named (m.warned, bounded).
func (x *Exchange) servedAt(served string, actual spec.Usage, cost int64) int64 {
	tier := x.req.Policy.TierOf(served)
	if tier == x.quote.Tier {
		return cost // the tier priced already (the common case: no second quote)
	}
	q := x.quoteIn(served)
	if !q.Priced {
		x.m.opt.Metrics.servedTierUnpriced(x, tier)
		if x.m.warned.first("served-tier|"+x.quote.Label+"|"+served, 0, 0, -1) {
			x.m.log.Warn("answer served at a tier without prices: settled at the price of the dearest tier priced",
				"request_id", x.req.ID, "model", x.req.Model, "served_tier", served, "asked_tier", x.quote.Tier.String(), "missing", q.Missing)
		}
		if q, ok := x.dearestPriced(actual); ok {
			if c := q.Price.MicroUSD(actual); c > cost {
				x.quote = q
				return c
			}
		}
		return cost
	}
	if c := q.Price.MicroUSD(actual); c > cost {
		x.quote = q
		return c
	}
	return cost
}

// pricedTiers are the tiers dearestPriced tries, as a request names them.
var pricedTiers = [...]string{spec.TierPriority.String(), spec.TierStandard.String(), spec.TierFlex.String()}

// dearestPriced is the quote, among the tiers the price table prices for
// x's model (with x's audio and geography premiums), under which actual
// costs the most; ok false when it prices none.
func (x *Exchange) dearestPriced(actual spec.Usage) (best policy.Quote, ok bool) {
	var most int64
	for _, t := range pricedTiers {
		q := x.quoteIn(t)
		if !q.Priced {
			continue
		}
		if c := q.Price.MicroUSD(actual); !ok || c > most {
			best, most, ok = q, c, true
		}
	}
	return best, ok
}
