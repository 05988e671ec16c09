package meter

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"sync"
)

// maxBudgetWarnings is the most x-llmguard-budget-warning headers one
// response carries: the most used quotas, when more have crossed a
// threshold, so that a request under a thousand quotas does not get a
// thousand headers. Crossings are logged and counted as before.
const maxBudgetWarnings = 4

// budgetWarnings notes, for the x-llmguard-budget-warning header, every
// quota of the request whose use before this request (its level at
// admission less this request's own reservation: spend settled so far,
// plus what requests still in flight hold) has crossed one of its warn_at
// thresholds: "<limit>; used=<fraction, 2 decimals>", at most
// maxBudgetWarnings of them (the most used, the narrowest scope first
// among equals). A request's own reservation never warns: it may be far
// above what the request will cost. The crossing itself is logged and
// counted at settlement, on spend (budgetCrossings).
func (m *Meter) budgetWarnings(x *Exchange) {
	type hit struct {
		name string
		used float64
	}
	var hits []hit
	for i := range x.rules {
		a := &x.rules[i]
		if !warns(a) {
			continue
		}
		used := float64(settledLevel(a, 0)) / float64(a.Limit.Capacity)
		if crossedAt(a.Rule.WarnAt, used) < 0 {
			continue
		}
		hits = append(hits, hit{a.Rule.Name, used})
	}
	if len(hits) > maxBudgetWarnings {
		slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.used, a.used) })
		hits = hits[:maxBudgetWarnings]
	}
	for _, h := range hits {
		x.warnings = append(x.warnings, h.name+"; used="+strconv.FormatFloat(h.used, 'f', 2, 64))
	}
}

// budgetCrossings logs and counts, once per threshold, period and amount
// (a quota raised or lowered live warns again against its new amount) on
// this node, each warn_at threshold of the request's quotas that its settled
// cost crossed: the quota's use right after settlement, taken as its
// level at admission with this request's reservation replaced by what it
// really cost (settled[i], in rule i's unit). Reservations of other
// requests still in flight at admission count as used; nothing else does.
// A request that spends past several thresholds at once reports each of
// them; the highest threshold reached is reported too when this node has
// not yet (a node started when the quota was already past some), but not
// the lower ones crossed before the request.
func (m *Meter) budgetCrossings(x *Exchange, settled []int64) {
	for i := range x.rules {
		a := &x.rules[i]
		if !warns(a) || i >= len(settled) {
			continue
		}
		before := float64(settledLevel(a, 0)) / float64(a.Limit.Capacity)
		used := float64(settledLevel(a, settled[i])) / float64(a.Limit.Capacity)
		crossed := crossedAt(a.Rule.WarnAt, used)
		for t := 0; t <= crossed; t++ {
			if t < crossed && before >= a.Rule.WarnAt[t] {
				continue // past it before this request: its crossing was another's
			}
			if m.warned.first(a.Key, a.Limit.WindowStart.Unix(), a.Limit.Capacity, t) {
				m.opt.Metrics.budgetWarning(a.Rule.Name, x.req.Principal.Tenant)
				m.log.Warn("budget threshold crossed", "limit", a.Rule.Name, "key", a.Key, "threshold", a.Rule.WarnAt[t],
					"used", math.Round(used*1e4)/1e4, "period_end", a.Limit.WindowEnd) // a fraction to 4 places (trial11: used=0.8367272727272728)
			}
		}
	}
}

// warns reports whether a is a quota with warn_at thresholds.
func warns(a *Applied) bool {
	return len(a.Rule.WarnAt) > 0 && a.Limit.IsQuota() && a.Limit.Capacity > 0
}

// crossedAt is the index of the highest threshold of warnAt (increasing)
// that used reaches, -1 when none.
func crossedAt(warnAt []float64, used float64) int {
	crossed := -1
	for i, w := range warnAt {
		if used >= w {
			crossed = i
		}
	}
	return crossed
}

// warnings remembers which (bucket, period, amount, threshold) crossings were
// reported, so each is logged once per period. It forgets everything past
// a bound (a new period's crossings would be reported again then, which is
// harmless). Safe for concurrent use.
type warnings struct {
	mu   sync.Mutex
	seen map[warnKey]struct{}
}

type warnKey struct {
	key       string
	window    int64 // the period's start, Unix seconds
	amount    int64 // the quota's capacity, in its unit
	threshold int   // index into warn_at
}

const maxWarnings = 100000

func (w *warnings) first(key string, window, amount int64, threshold int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := warnKey{key, window, amount, threshold}
	if _, ok := w.seen[k]; ok {
		return false
	}
	if w.seen == nil || len(w.seen) >= maxWarnings {
		w.seen = make(map[warnKey]struct{})
	}
	w.seen[k] = struct{}{}
	return true
}
