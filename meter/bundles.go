package meter

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A request records some fifteen series as it is admitted and settled;
// looked up one by one in their seriesCaches (each a hash and comparison of
// up to four label values), the lookups cost more than the recording. The
// series that share their label values are therefore bundled: one
// flowSeries per flavor, model and tenant, one ruleSeries per limit and
// tenant, each looked up once at admission, kept on the Exchange and read
// again at settlement. A bundle's children are found in the same
// seriesCaches (so in the same vectors) on first use, never before: a
// bundle exports no series a request has not recorded.

// child is one child of a vector, found in its seriesCache on first use
// and kept. The zero value is empty. Safe for concurrent use: two first
// uses store the same child.
type child[M any] struct{ p atomic.Pointer[M] }

// get returns the child, looking up the first n values of k in c the
// first time.
func (s *child[M]) get(c *seriesCache[M], n int, k labelValues) M {
	if p := s.p.Load(); p != nil {
		return *p
	}
	m := c.get(n, k)
	s.p.Store(&m)
	return m
}

// tokenKinds are the kind label values of tokens_total, in the order of
// flowSeries.tokens.
var tokenKinds = [...]string{"input", "cached_input", "cache_write", "output", "reasoning"}

// flowSeries are the series of requests of one flavor, model label and
// tenant label: tokens_estimated_total (input, output), tokens_total (by
// tokenKinds), estimate_ratio, spend_usd_total, and requests_total's
// allowed series (no limit named).
type flowSeries struct {
	flavor, model, tenant string
	allowed               child[prometheus.Counter]
	estimated             [2]child[prometheus.Counter]
	tokens                [len(tokenKinds)]child[prometheus.Counter]
	ratio                 child[prometheus.Observer]
	spend                 child[prometheus.Counter]
}

// ruleSeries are the series of one limit and tenant label:
// reserved_units_total, refunded_units_total, charged_units_total,
// and limit_utilization (token buckets).
type ruleSeries struct {
	limit, tenant               string
	reserved, refunded, charged child[prometheus.Counter]
	utilization                 child[prometheus.Gauge]
}

// flowOf returns the flowSeries of x, an Exchange being admitted, taken
// from m.memo or looked up (and kept there), and kept on x.
func (m *Metrics) flowOf(x *Exchange) *flowSeries {
	if x.flow == nil {
		x.flow = m.memo.flowOf(x)
	}
	if x.flow == nil {
		x.flow = m.lookupFlow(x)
		m.memo.flow.Store(x.flow)
	}
	return x.flow
}

// flowIn returns the flowSeries admission kept on x, or looks it up
// without keeping it (x may be read by another goroutine by then).
func (m *Metrics) flowIn(x *Exchange) *flowSeries {
	if x.flow != nil {
		return x.flow
	}
	return m.lookupFlow(x)
}

func (m *Metrics) lookupFlow(x *Exchange) *flowSeries {
	return m.flows.get(3, labelValues{x.req.Flavor.String(), m.models.get(x.modelLabel), m.tenants.get(x.req.Principal.Tenant)})
}

// ruleOf returns the ruleSeries of a, a rule of an Exchange being
// admitted, taken from m.memo or looked up, and kept on a.
func (m *Metrics) ruleOf(a *Applied, tenant string) *ruleSeries {
	if a.series == nil {
		a.series = m.memo.ruleOf(a.Rule, tenant)
	}
	if a.series == nil {
		a.series = m.rules.get(2, labelValues{a.Rule.Name, tenant})
		m.memo.slot(a.Rule).Store(a.series)
	}
	return a.series
}

// UpstreamSeries are one upstream's series: upstream_responses_total by
// status and upstream_duration_seconds by status class, each found in its
// seriesCache on first use and kept, so that recording an answer looks
// nothing up (two lookups of two label values a request before). Get one
// per upstream with Metrics.UpstreamSeries and keep it; its memory is one
// pointer per HTTP status (about 5 KB). A nil *UpstreamSeries records
// nothing. Safe for concurrent use.
type UpstreamSeries struct {
	m      *Metrics
	name   string
	status [len(statusLabels)]child[prometheus.Counter]
	class  [5]child[prometheus.Observer] // 1xx to 5xx
}

// UpstreamSeries returns the series of the upstream named name (nil when m
// is nil).
func (m *Metrics) UpstreamSeries(name string) *UpstreamSeries {
	if m == nil {
		return nil
	}
	return &UpstreamSeries{m: m, name: name}
}

// Record is Metrics.Upstream for u's upstream: one answer of status (0:
// unreachable) and, for an answer, d.
func (u *UpstreamSeries) Record(status int, d time.Duration) {
	if u == nil {
		return
	}
	m := u.m
	if status < 0 || status >= len(u.status) {
		m.Upstream(u.name, status, d)
		return
	}
	u.status[status].get(m.cUpstreamStatus, 2, labelValues{u.name, statusLabels[status]}).Inc()
	if status == 0 { // a failed dial is not a latency
		return
	}
	if c := status / 100; c >= 1 && c <= 5 {
		u.class[c-1].get(m.cUpstreamSeconds, 2, labelValues{u.name, classLabel(status)}).Observe(d.Seconds())
		return
	}
	m.cUpstreamSeconds.get(2, labelValues{u.name, classLabel(status)}).Observe(d.Seconds())
}
