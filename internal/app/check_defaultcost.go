package app

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// defaultCost is what a minimal request for one model reserves when it
// sets no maximum output: its input and output tokens and its price.
type defaultCost struct {
	model   string
	in, out int64
	search  spec.SearchContextSize // the per-request search fee a minimal request reserves (a Sonar or search model)
	quote   policy.Quote
	// own: the output reservation is the model's own
	// models.<name>.default_max_output_tokens, not the top-level default.
	own bool
}

// defaultCosts weighs a minimal request (one empty user message; an empty
// input for an embedding model) for every model of cfg — those the file
// lists and those of the embedded price table alike — sorted by name.
func defaultCosts(cfg *config.Config, pol *policy.Policy, w *weigher.Weigher) []defaultCost {
	names := slices.Sorted(maps.Keys(cfg.Models))
	out := make([]defaultCost, 0, len(names))
	for _, name := range names {
		q := strconv.Quote(name)
		var est weigher.Estimate
		switch {
		case strings.Contains(name, "embedding"):
			est = w.Embeddings([]byte(`{"model":` + q + `,"input":""}`))
		case strings.HasPrefix(name, "claude") || strings.HasPrefix(name, "anthropic"):
			est = w.Messages([]byte(`{"model":` + q + `,"messages":[{"role":"user","content":""}]}`))
		default:
			est = w.Chat([]byte(`{"model":` + q + `,"messages":[{"role":"user","content":""}]}`))
		}
		out = append(out, defaultCost{model: name, in: est.InputTokens, out: est.OutputTokens, search: est.SearchContext,
			quote: pol.Quote(name, ""), own: cfg.Models[name].DefaultMaxOutputTokens > 0})
	}
	return out
}

// overCost is a model whose default request does not fit a limit: the
// request's cost in the limit's unit (units), the output reservation it
// was priced with (reserve, tokens), and the most output that would fit
// beside its input (fit, tokens; -1: not even the input alone fits).
type overCost struct {
	*defaultCost
	reserve, units, fit int64
}

// checkDefaultCosts warns of each limit whose capacity is below what a
// request that sets no output maximum reserves for some model the limit
// applies to: every such call is refused as too large. The models are
// told apart by where their reservation comes from, since that is the
// setting to change: the top-level default_max_output_tokens (every
// model without one of its own, the embedded price table's included:
// trial25's platform team, whose config listed gpt-4o-mini alone, was
// told of chatgpt-4o-latest and "56 other models" with no word of
// where they came from), a model's own models.<name>.default_max_output_tokens,
// or a cap_output limit's cap_output_min. Each warning gives the largest
// value of that setting that fits, when one does.
func checkDefaultCosts(cfg *config.Config, pol *policy.Policy, w *weigher.Weigher) []Finding {
	costs := defaultCosts(cfg, pol, w)
	var out []Finding
	for i, l := range cfg.Limits {
		r := ruleNamed(pol, l.Name)
		if r == nil || r.Unit == policy.UnitRequests || r.Unit == spec.UnitConcurrent || r.Shadow {
			continue // a shadow limit never refuses
		}
		capacity := r.RegionCapacity()
		var shared, own []overCost // reservations from the top-level default; from a model's own
		for j := range costs {
			c := &costs[j]
			if !r.MatchesModel(c.model) || (r.Unit == policy.UnitUSD && !c.quote.Priced) {
				continue
			}
			o := c.out
			if r.CapOutput { // lowered to cap_output_min before it is refused
				o = min(o, r.CapOutputMin)
			}
			units := r.Units(spec.Usage{InputTokens: c.in, OutputTokens: o, SearchContext: c.search}, c.quote.Price)
			if units <= capacity {
				continue
			}
			oc := overCost{defaultCost: c, reserve: o, units: units, fit: fittingOutput(r, c, o, capacity)}
			if c.own && !r.CapOutput {
				own = append(own, oc)
			} else {
				shared = append(shared, oc)
			}
		}
		if len(shared) == 0 && len(own) == 0 {
			continue
		}
		var what, fixes []string
		if len(shared) > 0 {
			w, f := sharedReservation(r, shared)
			what, fixes = append(what, w), append(fixes, f)
		}
		if len(own) > 0 {
			w, f := ownReservation(r, own)
			what, fixes = append(what, w), append(fixes, f)
		}
		out = append(out, Finding{Field: fmt.Sprintf("limits[%d]", i), Message: fmt.Sprintf(
			"limit %s holds %s, less than a request that sets no max_tokens reserves for %s. "+
				"Such calls get 429 with x-should-retry: false, and waiting will not help; calls whose max_tokens "+
				"(max_completion_tokens, max_output_tokens) fits are not affected. To admit them: %s",
			l.Name, amount(r, capacity), strings.Join(what, "; and for "), strings.Join(fixes, "; and "))})
	}
	return out
}

// dearest orders over's models by cost, the dearest first, and among
// equal costs the shortest name first (o1 before chatgpt-4o-latest: the
// more familiar).
func dearest(over []overCost) {
	slices.SortFunc(over, func(a, b overCost) int {
		return cmp.Or(cmp.Compare(b.units, a.units), cmp.Compare(len(a.model), len(b.model)), cmp.Compare(a.model, b.model))
	})
}

// sharedReservation describes the models whose default request does not
// fit r and whose output reservation is the top-level
// default_max_output_tokens (or r's cap_output_min), and the fix: the
// setting's largest value that fits all of them.
func sharedReservation(r *policy.Rule, over []overCost) (what, fix string) {
	dearest(over)
	worst := over[0]
	fit := slices.MinFunc(over, func(a, b overCost) int { return cmp.Compare(a.fit, b.fit) }).fit
	setting := "default_max_output_tokens"
	why := "they have no default_max_output_tokens of their own under models:, so such a request reserves the top-level default_max_output_tokens"
	if len(over) == 1 {
		why = "it has no default_max_output_tokens of its own under models:, so such a request reserves the top-level default_max_output_tokens"
	}
	if r.CapOutput {
		setting, why = "cap_output_min", "cap_output lowers such a request's output no further than cap_output_min"
	}
	what = fmt.Sprintf("%s (the embedded price table's models count, not only those under models:): "+
		"%s, %d output tokens; a minimal request costs up to %s (%s: %d input tokens, %d output)",
		modelList(over), why, worst.reserve, amount(r, worst.units), worst.model, worst.in, worst.reserve)
	fix = fmt.Sprintf("set %s to %d or less, or raise the limit's burst or quota", setting, fit)
	if !r.CapOutput && (len(over) == 1 || worst.units > over[len(over)-1].units) {
		// The dearest model alone may set the bound (o1-pro's $600 per
		// million output tokens under a dollar budget): a default of its
		// own keeps the others' reservations. Among equal costs (a token
		// limit) no model is the dearest.
		fix = fmt.Sprintf("set %s to %d or less, give the dearest (%s) a smaller default_max_output_tokens of its own under models:, "+
			"or raise the limit's burst or quota", setting, fit, worst.model)
	}
	if fit < 0 {
		fix = "raise the limit's burst or quota (a minimal request to " + over[slices.IndexFunc(over, func(o overCost) bool { return o.fit < 0 })].model +
			" costs more even with no output: its input, plus a search model's per-request fee)"
	}
	return what, fix
}

// ownReservation describes the models whose default request does not
// fit r because of their own default_max_output_tokens, the dearest
// named, and the fix: that model's setting's largest value that fits.
func ownReservation(r *policy.Rule, over []overCost) (what, fix string) {
	dearest(over)
	worst := over[0]
	setting := "models." + strconv.Quote(worst.model) + ".default_max_output_tokens"
	others := ""
	if len(over) > 1 {
		others = " (and 1 other model with a default_max_output_tokens of its own)"
		if len(over) > 2 {
			others = fmt.Sprintf(" (and %d other models with a default_max_output_tokens of their own)", len(over)-1)
		}
	}
	what = fmt.Sprintf("%s%s, whose %s is %d: a minimal request costs %s (%d input tokens, %d output)",
		worst.model, others, setting, worst.reserve, amount(r, worst.units), worst.in, worst.reserve)
	fix = fmt.Sprintf("lower %s to %d or less, or raise the limit's burst or quota", setting, worst.fit)
	if worst.fit < 0 {
		fix = "raise the limit's burst or quota (a minimal request to " + worst.model +
			" costs more even with no output: its input, plus a search model's per-request fee)"
	}
	return what, fix
}

// modelList names up to three of over's models, the shortest names
// first (gpt-4o before chatgpt-4o-latest: the familiar ones), and counts
// the rest.
func modelList(over []overCost) string {
	names := make([]string, len(over))
	for i, o := range over {
		names[i] = o.model
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	// names is a copy: over keeps its order, the dearest first.
	if len(names) == 1 {
		return names[0]
	}
	if len(names) <= 3 {
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return fmt.Sprintf("%d models it applies to, such as %s", len(names), strings.Join(names[:3], ", "))
}

// amount writes n units of r's unit for people: dollars for usd.
func amount(r *policy.Rule, n int64) string {
	if r.Unit == policy.UnitUSD {
		return fmt.Sprintf("$%.6f", float64(n)/1e6)
	}
	return fmt.Sprintf("%d %s", n, r.Unit)
}

// fittingOutput is the most output tokens, at most max, that a minimal
// request to c's model can reserve within capacity units of r, or -1
// when its input alone does not fit. A cost is not decreasing in output,
// so the largest fitting count is found by bisection.
func fittingOutput(r *policy.Rule, c *defaultCost, max, capacity int64) int64 {
	units := func(o int64) int64 {
		return r.Units(spec.Usage{InputTokens: c.in, OutputTokens: o, SearchContext: c.search}, c.quote.Price)
	}
	if units(0) > capacity {
		return -1
	}
	lo, hi := int64(0), max // units(lo) fits; the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if units(mid) <= capacity {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
