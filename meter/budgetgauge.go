package meter

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmguard/llmguard/policy"
)

// The budget gauges (quota_used, quota_limit,
// quota_period_end_timestamp_seconds, and limit_utilization for quotas)
// report spend: a quota's use right after a request settled, its
// reservation replaced by what it really cost (the level budgetLevels
// gives the webhook alerts), not the level at admission, which counts the
// whole reservation as spent. They are computed when Prometheus scrapes,
// on the Metrics' clock, from the levels kept here: a level whose period
// has ended reads 0, and the period end moves to the current period's,
// without waiting for a request.
//
// One series per limit and tenant label. A tenant's quota of scope user
// or key has a bucket per user or key: the series shows the most used of
// them (used / quota), so that an operator learns when any user nears
// their quota without a label per user, whose number no one bounds. The
// buckets are tracked in a bounded table: at most MaxSubjects per limit
// and tenant label, keeping the most used (a bucket less used than every
// tracked one while the table is full is not tracked; the most used is
// never evicted), so memory is at most limits × (tenant labels) ×
// MaxSubjects levels. A global quota has one bucket for every tenant: it
// is shown once, under tenant "".

// defaultMaxSubjects is MetricsOptions.MaxSubjects' default.
const defaultMaxSubjects = 16

// Help texts of the budget gauges; limit_utilization's is shared with the
// token buckets' series (utilizationHelp), as one family has one help.
const (
	utilizationHelp = "Share of a limit in use: for a token bucket 1 − remaining / capacity at the last admission; for a quota its settled use / quota in the current period (the most used user or key of the tenant for a user- or key-scoped quota), 0 once the period ends."
	quotaUsedHelp   = "A quota's settled use in its current period (reservations replaced by real costs), in the limit's unit (USD for usd limits); for a user- or key-scoped quota the most used user or key of the tenant; 0 once the period ends."
	quotaLimitHelp  = "A quota's amount per period, in the limit's unit (USD for usd limits)."
	quotaEndHelp    = "End of a quota's current period, unix seconds."
	exhaustedHelp   = "1 when a quota denied a request (one not larger than the quota) in its current period at its current amount, else 0: it now refuses what it cannot pay, though quota_used may read below quota_limit (a denied reservation is never spent)."
)

// quotaGroup names one series of the budget gauges: a limit and a tenant
// label ("" for a global quota).
type quotaGroup struct{ limit, tenant string }

// subjectLevel is one quota bucket's settled use: used and capacity in
// the rule's unit (micro-USD for usd), in the period [start, end).
type subjectLevel struct {
	key            string // the bucket's store key: one per user, key or tenant
	used, capacity int64
	start, end     time.Time
	// seq is the admission (budgetGauges.seq) of the request whose level
	// used was read from; 0 for a level observed without one.
	seq uint64
	// deltas is the sum, over this node's settlements of the bucket that
	// reached observe, of cost − reservation (in the rule's unit): a
	// running count whose differences only matter, carried across
	// periods. An admission keeps its value (gaugeMark.deltas).
	deltas int64
}

// gaugeMark is what the budget gauges note on a quota rule of a request
// at its admission (budgetGauges.admit), so that its settlement can tell
// which of the bucket's settlements its level at admission already
// counts: its place in the order of admissions, and the bucket's
// subjectLevel.deltas then. The zero value is a request admitted before
// any other and before any settlement of its bucket.
type gaugeMark struct {
	seq    uint64
	deltas int64
	series *quotaSeries // the rule's series under the tenant label, when it existed at admission
}

// share is l's used / capacity.
func (l subjectLevel) share() float64 { return float64(l.used) / float64(l.capacity) }

// quotaSeries is one group's tracked buckets, and its rule while no
// policy has been prepared.
type quotaSeries struct {
	mu       sync.Mutex
	rule     *policy.Rule   // the rule last observed under; the prepared policy's wins (rows)
	subjects []subjectLevel // at most budgetGauges.max
	// denied is the period and amount under which the quota last denied a
	// request of this group (zero: never): quota_exhausted reads 1 while
	// the rule's current period and amount are those (a reload that
	// raises or lowers the amount, or the period's end, clears it).
	denied struct {
		end      time.Time
		capacity int64
	}
}

// budgetGauges is the prometheus.Collector of the budget gauges, and of
// limit_utilization's token-bucket series (buckets, set at admission; a
// series of a limit that is now a quota is dropped). Safe for concurrent
// use, and without a process-wide lock on the request path: a settlement
// finds its series in a sync.Map (no lock once the series exists) and
// locks that series alone, so settlements under different limits or
// tenants never wait for one another (issue #13: no global locks on the
// memory-store path).
type budgetGauges struct {
	now     func() time.Time
	max     int
	buckets *prometheus.GaugeVec // limit_utilization of token buckets, not registered

	used, limit, end, util, exhausted *prometheus.Desc

	groups sync.Map // quotaGroup → *quotaSeries
	// seq numbers quota admissions in the order admit sees them
	// (gaugeMark.seq), from 1.
	seq atomic.Uint64
	// quotas are the quota rules by name since the last prepare; nil
	// before the first: every quota observed is kept.
	quotas atomic.Pointer[map[string]*policy.Rule]
}

func newBudgetGauges(now func() time.Time, max int) *budgetGauges {
	labels := []string{"limit", "tenant"}
	return &budgetGauges{
		now: now, max: max,
		buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmguard_limit_utilization", Help: utilizationHelp}, labels),
		used:    prometheus.NewDesc("llmguard_quota_used", quotaUsedHelp, labels, nil),
		limit:   prometheus.NewDesc("llmguard_quota_limit", quotaLimitHelp, labels, nil),
		end:     prometheus.NewDesc("llmguard_quota_period_end_timestamp_seconds", quotaEndHelp, labels, nil),
		util:    prometheus.NewDesc("llmguard_limit_utilization", utilizationHelp, labels, nil),

		exhausted: prometheus.NewDesc("llmguard_quota_exhausted", exhaustedHelp, labels, nil),
	}
}

// admit notes on quota a, admitted for a request under the tenant label,
// its place in the order of admissions and its bucket's settlement deltas
// so far, which observe reads when the request settles.
func (g *budgetGauges) admit(a *Applied, tenant string) {
	a.gauge = gaugeMark{seq: g.seq.Add(1)}
	if a.Rule.Scope == policy.ScopeGlobal {
		tenant = ""
	}
	v, ok := g.groups.Load(quotaGroup{a.Rule.Name, tenant})
	if !ok {
		return
	}
	s := v.(*quotaSeries)
	a.gauge.series = s
	s.mu.Lock()
	for _, l := range s.subjects {
		if l.key == a.Key {
			a.gauge.deltas = l.deltas
			break
		}
	}
	s.mu.Unlock()
}

// observe keeps the settled use of quota a's bucket (used units, in a's
// unit: its level at admission with the request's reservation replaced by
// its cost, which is delta more than the reservation) under the tenant
// label, at now (the Metrics' clock). A level of a period that has already
// ended is ignored (a request settled after its period turned), and so is
// a limit the prepared policy has no quota of (a reload removed it, or
// made it a rate).
//
// Requests settle in another order than they were admitted: a stream
// admitted first may settle after many short calls admitted later. Its
// level at admission is then older than the one kept, which counts its
// reservation (it was in flight at their admission): it moves the kept
// level by its delta rather than replacing it. The level of the latest
// admission replaces the kept one, plus the deltas of the settlements
// that came after its admission (the reservations it counted, settled
// since). Before, the last request to settle set the level: in trial27 a
// tenant's quota_used read $0.041948 while the store and the ledger said
// $0.042440, and stayed so until its next request.
func (g *budgetGauges) observe(a *Applied, tenant string, used, delta int64, now time.Time) {
	if a.Rule.Scope == policy.ScopeGlobal {
		tenant = ""
	}
	l := subjectLevel{key: a.Key, used: max(used, 0), capacity: a.Limit.Capacity, start: a.Limit.WindowStart, end: a.Limit.WindowEnd, seq: a.gauge.seq}
	if l.capacity <= 0 || !now.Before(l.end) {
		return
	}
	if q := g.quotas.Load(); q != nil && (*q)[a.Rule.Name] == nil {
		return
	}
	s := a.gauge.series
	if s == nil {
		s = g.series(a, tenant)
	}
	s.mu.Lock()
	s.rule = a.Rule
	l.deltas = delta
	for i := range s.subjects {
		k := &s.subjects[i]
		if k.key != l.key {
			continue
		}
		l.deltas = k.deltas + delta
		if k.start.Equal(l.start) {
			if k.seq > l.seq {
				// A later admission's level, which counted this
				// request's reservation: replace that by its cost.
				k.used, k.deltas = max(k.used+delta, 0), l.deltas
				s.mu.Unlock()
				return
			}
			l.used = max(l.used+k.deltas-a.gauge.deltas, 0)
		}
		break
	}
	s.subjects = keepLevel(s.subjects, l, g.max)
	s.mu.Unlock()
}

// series is the group of quota a under tenant label tenant ("" for a
// global quota), made on its first use.
func (g *budgetGauges) series(a *Applied, tenant string) *quotaSeries {
	k := quotaGroup{a.Rule.Name, tenant}
	v, ok := g.groups.Load(k)
	if !ok {
		v, _ = g.groups.LoadOrStore(k, &quotaSeries{rule: a.Rule, subjects: make([]subjectLevel, 0, 1)})
	}
	return v.(*quotaSeries)
}

// deny marks quota a, under the tenant label, as having denied a request
// at now in its period ending a.Limit.WindowEnd at amount a.Limit.Capacity
// (quota_exhausted). Its level is kept as observe keeps a settlement's: the
// use the store reported with the denial. Ignored as observe ignores.
func (g *budgetGauges) deny(a *Applied, tenant string, now time.Time) {
	if a.Rule.Scope == policy.ScopeGlobal {
		tenant = ""
	}
	if a.Limit.Capacity <= 0 || !now.Before(a.Limit.WindowEnd) {
		return
	}
	if q := g.quotas.Load(); q != nil && (*q)[a.Rule.Name] == nil {
		return
	}
	s := g.series(a, tenant)
	l := subjectLevel{key: a.Key, used: max(a.Limit.Capacity-a.Status.Remaining, 0), capacity: a.Limit.Capacity, start: a.Limit.WindowStart, end: a.Limit.WindowEnd,
		seq: g.seq.Add(1)} // the store's level now: newer than every admission's so far
	s.mu.Lock()
	s.rule = a.Rule
	for _, k := range s.subjects {
		if k.key == l.key {
			l.deltas = k.deltas
			break
		}
	}
	s.subjects = keepLevel(s.subjects, l, g.max)
	s.denied.end, s.denied.capacity = a.Limit.WindowEnd, a.Limit.Capacity
	s.mu.Unlock()
}

// keepLevel puts l into subjects, which hold at most max levels: it
// replaces l.key's level, drops those of periods that ended by l's start,
// and when full replaces the least used one, if l is more used.
func keepLevel(subjects []subjectLevel, l subjectLevel, max int) []subjectLevel {
	for _, s := range subjects {
		if s.key == l.key && s.start.After(l.start) {
			return subjects // a level of an earlier period than the one kept
		}
	}
	kept := subjects[:0]
	found := false
	for _, s := range subjects {
		switch {
		case s.key == l.key:
			s, found = l, true
		case !s.end.After(l.start):
			continue // its period is over
		}
		kept = append(kept, s)
	}
	if found {
		return kept
	}
	if len(kept) < max {
		return append(kept, l)
	}
	least := 0
	for i := range kept {
		if kept[i].share() < kept[least].share() {
			least = i
		}
	}
	if l.share() > kept[least].share() {
		kept[least] = l
	}
	return kept
}

// prepare makes rules (a new policy's) the rules of the budget gauges: the
// series of limits that are no longer quotas go, and the token-bucket
// series of limits that are now quotas. A settlement racing a prepare may
// put back a series of a removed limit; rows drops it at the next scrape.
func (g *budgetGauges) prepare(rules []policy.Rule) {
	quotas := make(map[string]*policy.Rule)
	for i := range rules {
		if r := &rules[i]; r.IsQuota() && !r.Shadow {
			quotas[r.Name] = r
			g.buckets.DeletePartialMatch(prometheus.Labels{"limit": r.Name})
		}
	}
	g.quotas.Store(&quotas)
	g.groups.Range(func(k, _ any) bool {
		if quotas[k.(quotaGroup).limit] == nil {
			g.groups.Delete(k)
		}
		return true
	})
}

// quotaRow is one series' values, in the rule's unit.
type quotaRow struct {
	group          quotaGroup
	used, capacity int64
	end            time.Time
	usd            bool
	exhausted      bool // the quota denied a request in this period at this amount
}

// rows are the budget gauges' values at now: per group, the most used
// bucket whose period has not ended, or 0 used of the rule's current
// period when none is left. Levels of ended periods are forgotten, and
// series of limits the prepared policy has no quota of are dropped. A
// series' rule is the prepared policy's (the one it was observed under
// before any), and its amount and period end are that rule's at now, not
// those a settlement recorded: a quota raised or lowered by a reload reads
// its new amount at once, on a node that settles nothing under it since
// (trial10: a quota lowered from $500 to $100 with $90 spent read 18 %
// used on such a node, and the alerts' max by over the fleet took its
// stale $500, so the 80 % alert stayed silent).
func (g *budgetGauges) rows(now time.Time) []quotaRow {
	var quotas map[string]*policy.Rule
	if q := g.quotas.Load(); q != nil {
		quotas = *q
	}
	var rows []quotaRow
	g.groups.Range(func(kv, v any) bool {
		k, s := kv.(quotaGroup), v.(*quotaSeries)
		s.mu.Lock()
		defer s.mu.Unlock()
		rule := s.rule
		if quotas != nil {
			if rule = quotas[k.limit]; rule == nil {
				g.groups.Delete(k)
				return true
			}
		}
		cur := rule.LimitAt(now)
		kept := s.subjects[:0]
		for _, l := range s.subjects {
			// A level of a period that began before the rule's current one
			// is gone too once a rule is prepared: a reload that made the
			// period start later (month to day) begins it afresh, as the
			// store does.
			if now.Before(l.end) && (quotas == nil || !l.start.Before(cur.WindowStart)) {
				kept = append(kept, l)
			}
		}
		clear(s.subjects[len(kept):])
		s.subjects = kept
		r := quotaRow{group: k, usd: rule.Unit == policy.UnitUSD}
		r.capacity, r.end = cur.Capacity, cur.WindowEnd
		r.exhausted = now.Before(s.denied.end) && s.denied.end.Equal(cur.WindowEnd) && s.denied.capacity == cur.Capacity
		if len(kept) > 0 {
			// Under a prepared rule every bucket's amount is cur's, so
			// the most used is the one that used most, whatever amount
			// its settlement recorded.
			more := func(a, b subjectLevel) bool { return a.share() > b.share() }
			if quotas != nil {
				more = func(a, b subjectLevel) bool { return a.used > b.used }
			}
			best := kept[0]
			for _, l := range kept[1:] {
				if more(l, best) {
					best = l
				}
			}
			r.used = best.used
			if quotas == nil {
				r.capacity, r.end = best.capacity, best.end
			}
		}
		rows = append(rows, r)
		return true
	})
	return rows
}

// Describe sends the five families' descriptions.
func (g *budgetGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.used
	ch <- g.limit
	ch <- g.end
	ch <- g.util
	ch <- g.exhausted
}

// Collect sends the budget gauges as of the clock, then the token
// buckets' limit_utilization series of limits that no quota series names.
func (g *budgetGauges) Collect(ch chan<- prometheus.Metric) {
	rows := g.rows(g.now())
	named := make(map[quotaGroup]bool, len(rows))
	for _, r := range rows {
		named[r.group] = true
		scale := 1.0
		if r.usd {
			scale = 1e6 // micro-USD, exported in USD (Prometheus' base unit)
		}
		share := 0.0
		if r.capacity > 0 {
			share = float64(r.used) / float64(r.capacity)
		}
		lv := []string{r.group.limit, r.group.tenant}
		ch <- prometheus.MustNewConstMetric(g.used, prometheus.GaugeValue, float64(r.used)/scale, lv...)
		ch <- prometheus.MustNewConstMetric(g.limit, prometheus.GaugeValue, float64(r.capacity)/scale, lv...)
		ch <- prometheus.MustNewConstMetric(g.end, prometheus.GaugeValue, float64(r.end.Unix()), lv...)
		ch <- prometheus.MustNewConstMetric(g.util, prometheus.GaugeValue, share, lv...)
		exhausted := 0.0
		if r.exhausted {
			exhausted = 1
		}
		ch <- prometheus.MustNewConstMetric(g.exhausted, prometheus.GaugeValue, exhausted, lv...)
	}
	bc := make(chan prometheus.Metric, 64)
	go func() {
		g.buckets.Collect(bc)
		close(bc)
	}()
	for m := range bc {
		if len(named) > 0 && named[groupOf(m)] {
			continue // a limit a reload made a quota, set by a request admitted under the old policy
		}
		ch <- m
	}
}

// groupOf is the limit and tenant labels of m, a limit_utilization series.
func groupOf(m prometheus.Metric) quotaGroup {
	var d dto.Metric
	if m.Write(&d) != nil {
		return quotaGroup{}
	}
	var k quotaGroup
	for _, p := range d.GetLabel() {
		switch p.GetName() {
		case "limit":
			k.limit = p.GetValue()
		case "tenant":
			k.tenant = p.GetValue()
		}
	}
	return k
}

var _ prometheus.Collector = (*budgetGauges)(nil)

// settledLevel is quota rule a's use right after settlement: its level at
// admission with the request's reservation replaced by settled, what it
// really cost (in a's unit).
func settledLevel(a *Applied, settled int64) int64 {
	return a.Limit.Capacity - a.Status.Remaining - a.Reserved + settled
}

// isQuota reports whether a is a quota with an amount (the budget gauges'
// limits).
func isQuota(a *Applied) bool { return a.Limit.IsQuota() && a.Limit.Capacity > 0 }
