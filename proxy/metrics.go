package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// Outcomes of a request, the values of the outcome label.
const (
	outcomeAllowed       = "allowed"
	outcomeLimited       = "limited"
	outcomeTooLarge      = "too_large"
	outcomeUnauthorized  = "unauthorized"
	outcomeInvalid       = "invalid"
	outcomeUpstreamError = "upstream_error"
	outcomeFailOpen      = "fail_open"
	outcomeFailClosed    = "fail_closed"
	// outcomeInternalError: llmguard failed (a recovered panic) and answered 500.
	outcomeInternalError = "internal_error"
	// outcomeOverloaded: refused because the request bodies in memory
	// fill max_inflight_body_bytes.
	outcomeOverloaded = "overloaded"
)

func outcomeFor(status int) string {
	if status >= 500 {
		return outcomeUpstreamError
	}
	return outcomeAllowed
}

// MetricsOptions bounds the label sets of Metrics. The zero value is a
// usable default.
type MetricsOptions struct {
	// MaxTenants and MaxModels cap the distinct tenant and model label
	// values; later ones are counted under "other". Zero: 100 each.
	MaxTenants, MaxModels int
}

// Metrics are the proxy's Prometheus collectors (DESIGN.md §9). Labels are
// bounded: flavor, outcome, limit and upstream come from the config; tenant
// and model are capped (MetricsOptions), never user ids or keys. A nil
// *Metrics records nothing. Safe for concurrent use.
type Metrics struct {
	requests        *prometheus.CounterVec
	tokensEstimated *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	estimateRatio   *prometheus.HistogramVec
	reserved        *prometheus.CounterVec
	refunded        *prometheus.CounterVec
	charged         *prometheus.CounterVec
	spend           *prometheus.CounterVec
	utilization     *prometheus.GaugeVec
	decision        prometheus.Histogram
	overhead        prometheus.Histogram
	upstreamSeconds *prometheus.HistogramVec
	upstreamStatus  *prometheus.CounterVec
	failures        *prometheus.CounterVec
	budgetWarnings  *prometheus.CounterVec
	quotaUsed       *prometheus.GaugeVec
	quotaLimit      *prometheus.GaugeVec
	quotaEnd        *prometheus.GaugeVec
	panics          *prometheus.CounterVec
	bodyBytes       prometheus.Gauge

	tenants, models *labelCap
}

// NewMetrics registers the proxy's collectors on reg. The families, all
// prefixed llmguard_:
//
//	requests_total{flavor,model,outcome,limit}        requests by outcome (allowed, limited, too_large, fail_open,
//	                                                  fail_closed, upstream_error, unauthorized, invalid,
//	                                                  internal_error, overloaded); limit names
//	                                                  the denying limit, "" otherwise
//	tokens_estimated_total{flavor,model,kind}         tokens estimated at admission: input, output (reservation)
//	tokens_total{flavor,model,kind}                   tokens settled: input, cached_input, cache_write, output, reasoning
//	estimate_ratio{flavor}                            histogram of actual / estimated input tokens
//	reserved_units_total{limit}                       units reserved at admission, in the limit's unit
//	refunded_units_total{limit}                       units given back by reconciliation
//	charged_units_total{limit}                        units charged by reconciliation above the reservation
//	spend_usd_total{tenant,model}                     settled cost in USD
//	limit_utilization{limit,tenant}                   1 − remaining / capacity at the last admission
//	decision_duration_seconds                         histogram of the store take
//	overhead_seconds                                  histogram of time spent in llmguard, upstream excluded
//	upstream_duration_seconds{upstream,code}          histogram of upstream time to response (code: 2xx…5xx)
//	upstream_responses_total{upstream,status}         upstream answers by HTTP status (0: unreachable)
//	store_failure_decisions_total{limit,decision}     fail_open / fail_closed decisions while the store is unavailable
//	budget_warnings_total{limit,tenant}               quota warning thresholds crossed
//	quota_used{limit,tenant}                          a quota's use in its period at the last admission (USD for usd)
//	quota_limit{limit,tenant}                         the quota's amount per period (USD for usd)
//	quota_period_end_timestamp_seconds{limit,tenant}  when the quota's period ends (unix seconds)
//	panics_total{stage}                               panics recovered, by stage (handler, stream, watch, settle,
//	                                                  ledger, metrics; see the Stage constants)
//	request_body_bytes_in_flight                      request-body bytes held now, of max_inflight_body_bytes
//
// Errors: registration conflicts from reg.
func NewMetrics(reg prometheus.Registerer, o MetricsOptions) (*Metrics, error) {
	if o.MaxTenants <= 0 {
		o.MaxTenants = 100
	}
	if o.MaxModels <= 0 {
		o.MaxModels = 100
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmguard_" + name, Help: help}, labels)
	}
	m := &Metrics{
		requests: counter("requests_total", "Requests by API flavor, model, outcome and (for denials) the denying limit.",
			"flavor", "model", "outcome", "limit"),
		tokensEstimated: counter("tokens_estimated_total", "Tokens estimated at admission: input counted locally, output reserved.",
			"flavor", "model", "kind"),
		tokens: counter("tokens_total", "Tokens settled after the response (reported by the upstream, or counted locally when it reported none).",
			"flavor", "model", "kind"),
		estimateRatio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmguard_estimate_ratio",
			Help:    "Actual input tokens divided by the estimate made at admission (1 = exact).",
			Buckets: []float64{0.5, 0.8, 0.9, 0.95, 0.99, 1, 1.01, 1.05, 1.1, 1.2, 1.5, 2, 5},
		}, []string{"flavor"}),
		reserved: counter("reserved_units_total", "Units reserved at admission, in the limit's unit (micro-USD for usd limits).", "limit"),
		refunded: counter("refunded_units_total", "Units given back by reconciliation (the request used less than reserved).", "limit"),
		charged:  counter("charged_units_total", "Units charged by reconciliation above the reservation (the request used more).", "limit"),
		spend:    counter("spend_usd_total", "Settled cost of requests in USD, from token counts and the model's prices.", "tenant", "model"),
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmguard_limit_utilization",
			Help: "Share of a limit in use at the last admission: 1 − remaining / capacity (token bucket) or used / quota (quota).",
		}, []string{"limit", "tenant"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "llmguard_decision_duration_seconds",
			Help:    "Time to take a request's cost from its buckets (one store call).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025},
		}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "llmguard_overhead_seconds",
			Help:    "Time a request spends in llmguard itself (identify, weigh, take, relay setup), upstream time excluded.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}),
		upstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmguard_upstream_duration_seconds",
			Help:    "Upstream time until its response headers (and body, when not streamed), by upstream and status class.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"upstream", "code"}),
		upstreamStatus: counter("upstream_responses_total", "Upstream answers by HTTP status (0: unreachable).", "upstream", "status"),
		failures: counter("store_failure_decisions_total",
			"Decisions made while the store was unavailable, by limit: fail_open (checked against the node's fallback bucket) or fail_closed (503).",
			"limit", "decision"),
		budgetWarnings: counter("budget_warnings_total", "Quota warning thresholds (warn_at) crossed, once per threshold and period on each node.", "limit", "tenant"),
		quotaUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmguard_quota_used",
			Help: "A quota's use in its current period at the last admission, in the limit's unit (USD for usd limits)."}, []string{"limit", "tenant"}),
		quotaLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmguard_quota_limit",
			Help: "A quota's amount per period, in the limit's unit (USD for usd limits)."}, []string{"limit", "tenant"}),
		quotaEnd: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmguard_quota_period_end_timestamp_seconds",
			Help: "End of a quota's current period, unix seconds."}, []string{"limit", "tenant"}),
		panics: counter("panics_total", "Panics recovered while serving a request, by stage; the request was answered 500 or its stream ended, and settled once.", "stage"),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmguard_request_body_bytes_in_flight",
			Help: "Request-body bytes held in memory now, counted against max_inflight_body_bytes."}),
		tenants: newLabelCap(o.MaxTenants),
		models:  newLabelCap(o.MaxModels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.tokensEstimated, m.tokens, m.estimateRatio, m.reserved, m.refunded,
		m.charged, m.spend, m.utilization, m.decision, m.overhead, m.upstreamSeconds, m.upstreamStatus, m.failures, m.budgetWarnings,
		m.quotaUsed, m.quotaLimit, m.quotaEnd, m.panics, m.bodyBytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, st := range stages {
		m.panics.WithLabelValues(st)
	}
	return m, nil
}

func (m *Metrics) request(f Flavor, model, outcome, limit string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(f.String(), m.models.get(model), outcome, limit).Inc() // model: a priced name or "other"
}

// panicked counts a recovered panic in stage.
func (m *Metrics) panicked(stage string) {
	if m != nil {
		m.panics.WithLabelValues(stage).Inc()
	}
}

// bodyBytesHeld adds delta to the request-body bytes held (negative: given
// back).
func (m *Metrics) bodyBytesHeld(delta int64) {
	if m != nil {
		m.bodyBytes.Add(float64(delta))
	}
}

func (m *Metrics) decisionTime(d time.Duration) {
	if m != nil {
		m.decision.Observe(d.Seconds())
	}
}

// admitted records a request's estimate, reservations and the state of its
// limits at admission.
func (m *Metrics) admitted(x *exchange) {
	if m == nil {
		return
	}
	f, model := x.upstream.Flavor.String(), m.models.get(x.modelLabel)
	if x.est.InputTokens > 0 {
		m.tokensEstimated.WithLabelValues(f, model, "input").Add(float64(x.est.InputTokens))
	}
	if x.est.OutputTokens > 0 {
		m.tokensEstimated.WithLabelValues(f, model, "output").Add(float64(x.est.OutputTokens))
	}
	tenant := m.tenants.get(x.principal.Tenant)
	for _, a := range x.rules {
		if a.reserved > 0 {
			m.reserved.WithLabelValues(a.rule.Name).Add(float64(a.reserved))
		}
		if c := a.limit.Capacity; c > 0 {
			m.utilization.WithLabelValues(a.rule.Name, tenant).Set(1 - float64(a.status.Remaining)/float64(c))
		}
		if a.limit.IsQuota() {
			scale := 1.0
			if a.rule.Unit == policy.UnitUSD {
				scale = 1e6 // micro-USD, exported in USD (Prometheus' base unit)
			}
			m.quotaUsed.WithLabelValues(a.rule.Name, tenant).Set(float64(a.limit.Capacity-a.status.Remaining) / scale)
			m.quotaLimit.WithLabelValues(a.rule.Name, tenant).Set(float64(a.limit.Capacity) / scale)
			m.quotaEnd.WithLabelValues(a.rule.Name, tenant).Set(float64(a.limit.WindowEnd.Unix()))
		}
	}
}

// settled records what a finished request really used and cost, and what
// reconciliation gave back or charged.
func (m *Metrics) settled(x *exchange, u policy.Tokens, reasoning, costMicroUSD int64, known bool, deltas []bucket.Delta, limits []string) {
	if m == nil {
		return
	}
	f, model := x.upstream.Flavor.String(), m.models.get(x.modelLabel)
	if known {
		for _, t := range []struct {
			kind string
			n    int64
		}{{"input", u.Input}, {"cached_input", u.CachedInput}, {"cache_write", u.CacheWrite}, {"output", u.Output}, {"reasoning", reasoning}} {
			if t.n > 0 {
				m.tokens.WithLabelValues(f, model, t.kind).Add(float64(t.n))
			}
		}
		if x.est.InputTokens > 0 && u.Input > 0 {
			m.estimateRatio.WithLabelValues(f).Observe(float64(u.Input) / float64(x.est.InputTokens))
		}
	}
	if costMicroUSD > 0 {
		m.spend.WithLabelValues(m.tenants.get(x.principal.Tenant), model).Add(float64(costMicroUSD) / 1e6)
	}
	for i, d := range deltas {
		if d.Units < 0 {
			m.refunded.WithLabelValues(limits[i]).Add(float64(-d.Units))
		} else {
			m.charged.WithLabelValues(limits[i]).Add(float64(d.Units))
		}
	}
}

func (m *Metrics) upstream(name string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.upstreamStatus.WithLabelValues(name, strconv.Itoa(status)).Inc()
	if status > 0 { // a failed dial is not a latency: it would pull the percentiles down
		m.upstreamSeconds.WithLabelValues(name, strconv.Itoa(status/100)+"xx").Observe(d.Seconds())
	}
}

func (m *Metrics) overheadTime(d time.Duration) {
	if m != nil && d >= 0 {
		m.overhead.Observe(d.Seconds())
	}
}

// failure counts the limits of one request decided while the store was
// unavailable. The request itself is counted in requests_total when it is
// answered (Proxy.count): fail_closed with the limit that failed closed,
// fail_open when a fail-open one ends.
func (m *Metrics) failure(rules []applied, decision string) {
	if m == nil {
		return
	}
	for _, a := range rules {
		if (decision == outcomeFailOpen) == a.rule.FailOpen {
			m.failures.WithLabelValues(a.rule.Name, decision).Inc()
		}
	}
}

func (m *Metrics) budgetWarning(limit, tenant string) {
	if m != nil {
		m.budgetWarnings.WithLabelValues(limit, m.tenants.get(tenant)).Inc()
	}
}

// Prepare creates every labelled series of rules that counts decisions
// made only in rare events (fail-open, fail-closed), so that rate() sees
// the first event after start-up or a reload.
func (m *Metrics) Prepare(rules []policy.Rule) {
	if m == nil {
		return
	}
	for _, r := range rules {
		decision := outcomeFailClosed
		if r.FailOpen {
			decision = outcomeFailOpen
		}
		m.failures.WithLabelValues(r.Name, decision)
	}
}

// labelCap maps label values to themselves until max distinct values have
// been seen, and later ones to "other", so that no caller can grow a
// metric's series without bound. Safe for concurrent use.
type labelCap struct {
	max  int
	n    atomic.Int64
	seen sync.Map // string → struct{}
}

func newLabelCap(max int) *labelCap { return &labelCap{max: max} }

func (c *labelCap) get(v string) string {
	if v == "" {
		return ""
	}
	if _, ok := c.seen.Load(v); ok {
		return v
	}
	if c.n.Add(1) > int64(c.max) {
		c.n.Add(-1)
		return "other"
	}
	if _, loaded := c.seen.LoadOrStore(v, struct{}{}); loaded {
		c.n.Add(-1)
	}
	return v
}
