package meter

import (
	"cmp"
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
// quota of the request whose use right after this request's reservation has
// crossed one of its warn_at thresholds: "<limit>; used=<fraction, 2
// decimals>", at most maxBudgetWarnings of them (the most used, the
// narrowest scope first among equals). The first crossing of each threshold
// in each period (per node) is logged and counted.
func (m *Meter) budgetWarnings(x *Exchange) {
	type hit struct {
		name string
		used float64
	}
	var hits []hit
	for _, a := range x.rules {
		if len(a.Rule.WarnAt) == 0 || !a.Limit.IsQuota() || a.Limit.Capacity <= 0 {
			continue
		}
		used := float64(a.Limit.Capacity-a.Status.Remaining) / float64(a.Limit.Capacity)
		crossed := -1
		for i, w := range a.Rule.WarnAt {
			if used >= w {
				crossed = i
			}
		}
		if crossed < 0 {
			continue
		}
		hits = append(hits, hit{a.Rule.Name, used})
		if m.warned.first(a.Key, a.Limit.WindowStart.Unix(), crossed) {
			m.opt.Metrics.budgetWarning(a.Rule.Name, x.req.Principal.Tenant)
			m.log.Warn("budget threshold crossed", "limit", a.Rule.Name, "key", a.Key, "threshold", a.Rule.WarnAt[crossed],
				"used", used, "period_end", a.Limit.WindowEnd)
		}
	}
	if len(hits) > maxBudgetWarnings {
		slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.used, a.used) })
		hits = hits[:maxBudgetWarnings]
	}
	for _, h := range hits {
		x.warnings = append(x.warnings, h.name+"; used="+strconv.FormatFloat(h.used, 'f', 2, 64))
	}
}

// warnings remembers which (bucket, period, threshold) crossings were
// reported, so each is logged once per period. It forgets everything past
// a bound (a new period's crossings would be reported again then, which is
// harmless). Safe for concurrent use.
type warnings struct {
	mu   sync.Mutex
	seen map[warnKey]struct{}
}

type warnKey struct {
	key       string
	window    int64
	threshold int
}

const maxWarnings = 100000

func (w *warnings) first(key string, window int64, threshold int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := warnKey{key, window, threshold}
	if _, ok := w.seen[k]; ok {
		return false
	}
	if w.seen == nil || len(w.seen) >= maxWarnings {
		w.seen = make(map[warnKey]struct{})
	}
	w.seen[k] = struct{}{}
	return true
}
