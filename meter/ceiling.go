package meter

import (
	"github.com/llmguard/llmguard/spec"
)

// Figures a usage ceiling bounds: the figure label of
// llmguard_usage_implausible_total, one table for the label and the bit.
var ceilingFigures = [...]string{figureInput: "input", figureOutput: "output", figureWebSearches: "web_searches", figureFileSearches: "file_searches", figureImageTokens: "image_tokens", figureCost: "cost"}

// Bits of the figures over a ceiling (overCeiling), by index in
// ceilingFigures.
const (
	figureInput = iota
	figureOutput
	figureWebSearches
	figureFileSearches
	figureImageTokens
	figureCost // a cost the upstream reports (costCeiling)
)

// overCeiling is u within the ceiling c (Settlement.Ceiling) and which of its
// figures were above it (bit i: ceilingFigures[i]; 0: u is plausible and
// returned as it is). A figure above its bound is charged at the bound,
// and the parts of it (cached, cache-written and audio input; reasoning
// and audio output) at most the bounded whole; a bound of 0 bounds
// nothing.
func overCeiling(u, c spec.Usage) (spec.Usage, uint8) {
	var over uint8
	if c.InputTokens > 0 && u.InputTokens > c.InputTokens {
		over |= 1 << figureInput
		u.InputTokens = c.InputTokens
		u.CachedInputTokens = min(u.CachedInputTokens, u.InputTokens)
		u.CacheWriteTokens = min(u.CacheWriteTokens, u.InputTokens-max(u.CachedInputTokens, 0))
		u.CacheWrite1hTokens = min(u.CacheWrite1hTokens, u.CacheWriteTokens)
		u.AudioInputTokens = min(u.AudioInputTokens, u.InputTokens)
	}
	if c.OutputTokens > 0 && u.OutputTokens > c.OutputTokens {
		over |= 1 << figureOutput
		u.OutputTokens = c.OutputTokens
		u.ReasoningTokens = min(u.ReasoningTokens, u.OutputTokens)
		u.AudioOutputTokens = min(u.AudioOutputTokens, u.OutputTokens)
	}
	if c.WebSearches > 0 && u.WebSearches > c.WebSearches {
		over |= 1 << figureWebSearches
		u.WebSearches = c.WebSearches
	}
	if c.FileSearches > 0 && u.FileSearches > c.FileSearches {
		over |= 1 << figureFileSearches
		u.FileSearches = c.FileSearches
	}
	if c.ImageTokens > 0 && u.ImageTokens > c.ImageTokens {
		over |= 1 << figureImageTokens
		u.ImageTokens = c.ImageTokens
	}
	if c.BilledMicroUSD > 0 && u.BilledMicroUSD > c.BilledMicroUSD {
		over |= 1 << figureCost
		u.BilledMicroUSD = c.BilledMicroUSD
	}
	return u, over
}

// costCeiling is the most a cost the upstream reports for x (a LiteLLM
// cost header, an OpenRouter usage.cost: Settlement.BilledMicroUSD,
// spec.Usage.BilledMicroUSD) is charged, in micro-USD, given c, the
// request's ceiling (Settlement.Ceiling): the larger of c.BilledMicroUSD
// (reported_cost_ceiling_usd, $100 by default) and, for a request
// weighed in tokens and priced, its token ceiling at the dearest tier the
// table prices for its model, the most an implausible usage could be
// charged. So a reported cost is bounded as the usage it stands for is,
// and a gateway's dearer deployment behind a cheap model group (LiteLLM's
// tag routing, which the header exists to bill) is charged in full up to
// the configured figure however cheap the group's price. 0 bounds
// nothing. Priced only for an answer that reports a cost.
func (x *Exchange) costCeiling(c spec.Usage) int64 {
	most := c.BilledMicroUSD
	if !x.req.Weighed || x.req.PerImage > 0 || !x.quote.Priced || most <= 0 || (c.InputTokens <= 0 && c.OutputTokens <= 0) {
		return most
	}
	c.BilledMicroUSD = 0
	most = max(most, x.quote.Price.MicroUSD(c))
	if q, ok := x.dearestPriced(c); ok {
		most = max(most, q.Price.MicroUSD(c))
	}
	return most
}

// implausible records a settlement whose usage was over the request's
// ceiling: usage_implausible_total{flavor,figure} once per figure over,
// and a warning naming the request, what was reported and what was
// charged (figures only: no request data).
//
// reportedCost and chargedCost are the cost the upstream reported (its
// header or usage figure, micro-USD) and the ceiling it was charged at
// when over it; charged.BilledMicroUSD holds the latter for a known usage.
func (m *Meter) implausible(x *Exchange, reported, charged spec.Usage, reportedCost, chargedCost int64, over uint8) {
	m.opt.Metrics.implausible(x.req.Flavor, over)
	if over&(1<<figureCost) != 0 {
		chargedCost = max(chargedCost, charged.BilledMicroUSD)
	} else {
		reportedCost, chargedCost = 0, 0
	}
	m.log.Warn("the upstream reported more usage than the request can have used; charged at its ceiling",
		"request_id", x.req.ID, "flavor", x.req.Flavor.String(), "model", x.req.Model,
		"reported_input_tokens", reported.InputTokens, "reported_output_tokens", reported.OutputTokens,
		"reported_web_searches", reported.WebSearches, "reported_file_searches", reported.FileSearches,
		"reported_cost_micro_usd", reportedCost,
		"charged_input_tokens", charged.InputTokens, "charged_output_tokens", charged.OutputTokens,
		"charged_web_searches", charged.WebSearches, "charged_file_searches", charged.FileSearches,
		"charged_cost_micro_usd", chargedCost)
}

// implausible counts usage_implausible_total{flavor,figure} for each
// figure of over.
func (m *Metrics) implausible(f spec.Flavor, over uint8) {
	if m == nil {
		return
	}
	for i, name := range ceilingFigures {
		if over&(1<<i) != 0 {
			m.implausibleUsage.WithLabelValues(f.String(), name).Inc()
		}
	}
}
