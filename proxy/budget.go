package proxy

import (
	"strconv"
	"sync"
)

// budgetWarnings notes, for the x-llmguard-budget-warning header, every
// quota of the request whose use right after this request's reservation has
// crossed one of its warn_at thresholds: "<limit>; used=<fraction, 2
// decimals>". The first crossing of each threshold in each period (per
// node) is logged and counted.
func (p *Proxy) budgetWarnings(x *exchange) {
	for _, a := range x.rules {
		if len(a.rule.WarnAt) == 0 || !a.limit.IsQuota() || a.limit.Capacity <= 0 {
			continue
		}
		used := float64(a.limit.Capacity-a.status.Remaining) / float64(a.limit.Capacity)
		crossed := -1
		for i, w := range a.rule.WarnAt {
			if used >= w {
				crossed = i
			}
		}
		if crossed < 0 {
			continue
		}
		x.warnings = append(x.warnings, a.rule.Name+"; used="+strconv.FormatFloat(used, 'f', 2, 64))
		if p.warned.first(a.key, a.limit.WindowStart.Unix(), crossed) {
			p.opt.Metrics.budgetWarning(a.rule.Name, x.principal.Tenant)
			p.log.Warn("budget threshold crossed", "limit", a.rule.Name, "key", a.key, "threshold", a.rule.WarnAt[crossed],
				"used", used, "period_end", a.limit.WindowEnd)
		}
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
