package meter

import (
	"github.com/llmguard/llmguard/spec"
)

// Figures a usage ceiling bounds: the figure label of
// llmguard_usage_implausible_total, one table for the label and the bit.
var ceilingFigures = [...]string{figureInput: "input", figureOutput: "output", figureWebSearches: "web_searches", figureFileSearches: "file_searches", figureImageTokens: "image_tokens"}

// Bits of the figures over a ceiling (overCeiling), by index in
// ceilingFigures.
const (
	figureInput = iota
	figureOutput
	figureWebSearches
	figureFileSearches
	figureImageTokens
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
	return u, over
}

// implausible records a settlement whose usage was over the request's
// ceiling: usage_implausible_total{flavor,figure} once per figure over,
// and a warning naming the request, what was reported and what was
// charged (figures only: no request data).
func (m *Meter) implausible(x *Exchange, reported, charged spec.Usage, over uint8) {
	m.opt.Metrics.implausible(x.req.Flavor, over)
	m.log.Warn("the upstream reported more usage than the request can have used; charged at its ceiling",
		"request_id", x.req.ID, "flavor", x.req.Flavor.String(), "model", x.req.Model,
		"reported_input_tokens", reported.InputTokens, "reported_output_tokens", reported.OutputTokens,
		"reported_web_searches", reported.WebSearches, "reported_file_searches", reported.FileSearches,
		"charged_input_tokens", charged.InputTokens, "charged_output_tokens", charged.OutputTokens,
		"charged_web_searches", charged.WebSearches, "charged_file_searches", charged.FileSearches)
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
