package meter

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// Outcome is a request's outcome, the value of requests_total's outcome
// label: every way a request can end is one of these constants.
type Outcome = string

// Outcomes of a request.
const (
	// OutcomeAllowed: admitted and answered by the upstream (below 500).
	OutcomeAllowed Outcome = "allowed"
	// OutcomeLimited: denied by a limit with too little left (429).
	OutcomeLimited Outcome = "limited"
	// OutcomeTooLarge: denied because its cost exceeds a limit's capacity
	// (429 that waiting cannot cure).
	OutcomeTooLarge Outcome = "too_large"
	// OutcomeUnauthorized: no known credential (401).
	OutcomeUnauthorized Outcome = "unauthorized"
	// OutcomeInvalid: refused as malformed, unroutable or too large to read
	// (400, 404, 413).
	OutcomeInvalid Outcome = "invalid"
	// OutcomeUpstreamError: the upstream failed, answered 5xx, or could not
	// be reached (502).
	OutcomeUpstreamError Outcome = "upstream_error"
	// OutcomeFailOpen: admitted while the store was unavailable (by the
	// per-node fallback, or without limits).
	OutcomeFailOpen Outcome = "fail_open"
	// OutcomeFailClosed: refused with 503 because a fail-closed limit could
	// not be checked while the store was unavailable.
	OutcomeFailClosed Outcome = "fail_closed"
	// OutcomeInternalError: llmguard failed (a recovered panic, or a take
	// the store refused as invalid) and answered 500.
	OutcomeInternalError Outcome = "internal_error"
	// OutcomeOverloaded: refused with 503 because the request bodies in
	// memory fill max_inflight_body_bytes.
	OutcomeOverloaded Outcome = "overloaded"
	// OutcomeUnmetered: refused with 403 because it calls an endpoint that
	// spends tokens or money but is not weighed, under a token or dollar
	// limit.
	OutcomeUnmetered Outcome = "unmetered"
	// OutcomeLeft: the client went away while its request waited for its
	// buckets (on_limit: wait); nothing was answered or taken.
	OutcomeLeft Outcome = "left"
)

// OutcomeOf is the outcome of an admitted request the upstream answered
// with status: upstream_error for a 5xx, allowed otherwise.
func OutcomeOf(status int) Outcome {
	if status >= 500 {
		return OutcomeUpstreamError
	}
	return OutcomeAllowed
}

// Stages of a request's life at which a panic is recovered, the values of
// llmguard_panics_total's stage label. A panic in one stage never takes the
// process down: the request is answered (or its stream ended), its
// reservation settled once, and the panic counted and logged with its stack.
const (
	// StageHandler is the request handler: identify, weigh, take, forward,
	// and reading a buffered answer (package proxy).
	StageHandler = "handler"
	// StageStream is the relay of a streamed answer and its usage tap, on
	// fasthttp's writer goroutine (package proxy).
	StageStream = "stream"
	// StageWatch is the goroutine that notices a streaming client leave
	// (package proxy).
	StageWatch = "watch"
	// StageSettle is the reconciliation of a finished request's buckets.
	StageSettle = "settle"
	// StageLedger is the writing of a request's ledger record.
	StageLedger = "ledger"
	// StageMetrics is the recording of a request's metrics.
	StageMetrics = "metrics"
)

// stages are every Stage*, so that the panics counter has a series for each
// from the start.
var stages = []string{StageHandler, StageStream, StageWatch, StageSettle, StageLedger, StageMetrics}

// MetricsOptions bounds the label sets of Metrics. The zero value is a
// usable default.
type MetricsOptions struct {
	// MaxTenants and MaxModels cap the distinct tenant and model label
	// values; later ones are counted under "other". Zero: 100 each.
	MaxTenants, MaxModels int
	// MaxSubjects caps the buckets (users or keys) of one user- or
	// key-scoped quota and tenant label whose settled use the budget
	// gauges track to find the most used (budgetgauge.go); the most used
	// are kept. Zero: 16.
	MaxSubjects int
	// Now is the clock that decides, when Prometheus scrapes, whether a
	// quota's period has ended (its gauges then read 0). It should be the
	// Meter's (Options.Now). nil: time.Now.
	Now func() time.Time
}

// Metrics are llmguard's request collectors (DESIGN.md §9). Labels are
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
	utilization     *prometheus.GaugeVec // token buckets' limit_utilization, collected by budget
	overhead        prometheus.Histogram
	upstreamSeconds *prometheus.HistogramVec
	upstreamStatus  *prometheus.CounterVec
	failures        *prometheus.CounterVec
	// failureLimits are the limits Prepare last made failures' series for
	// (guarded by prepareMu), so that a reload removes those it dropped.
	prepareMu      sync.Mutex
	failureLimits  map[string]bool
	budgetWarnings *prometheus.CounterVec
	budget         *budgetGauges // quota_* and quotas' limit_utilization, at scrape time (budgetgauge.go)
	panics         *prometheus.CounterVec
	bodyBytes      prometheus.Gauge
	answerBytes    prometheus.Gauge       // response_body_bytes_in_flight
	unread         *prometheus.CounterVec // responses_unread_total{reason}
	inFlight       *prometheus.GaugeVec   // in-flight limits: requests holding a slot (inflight.go)
	shadow         *prometheus.CounterVec // shadow limits' decisions (shadow.go)
	// implausibleUsage: usage_implausible_total{flavor,figure} (ceiling.go)
	implausibleUsage *prometheus.CounterVec
	// unpricedTier: served_tier_unpriced_total{model,tier} (servedtier.go)
	unpricedTier *prometheus.CounterVec

	tenants, models *labelCap

	// The children of the vectors recorded on every request, cached by
	// label values (seriesCache): requests_total, tokens_estimated_total,
	// tokens_total, estimate_ratio, reserved, refunded and charged units,
	// spend, limit_utilization (token buckets), and the upstream's
	// responses and durations.
	cRequests, cTokensEstimated, cTokens, cReserved, cRefunded, cCharged, cSpend, cUpstreamStatus *seriesCache[prometheus.Counter]
	cEstimateRatio, cUpstreamSeconds                                                              *seriesCache[prometheus.Observer]
	cUtilization                                                                                  *seriesCache[prometheus.Gauge]
	// flows and rules hold the bundles of those children (bundles.go).
	flows *seriesCache[*flowSeries]
	rules *seriesCache[*ruleSeries]
	// memo keeps the bundles last found (memo.go).
	memo bundleMemo
}

// NewMetrics registers llmguard's request collectors on reg. The families, all
// prefixed llmguard_:
//
//	requests_total{flavor,model,outcome,limit}        requests by outcome (allowed, limited, too_large, fail_open,
//	                                                  fail_closed, upstream_error, unauthorized, invalid,
//	                                                  internal_error, overloaded, unmetered); limit names
//	                                                  the denying limit, "" otherwise
//	tokens_estimated_total{flavor,model,kind}         tokens estimated at admission: input, output (reservation)
//	tokens_total{flavor,model,kind}                   tokens settled: input, cached_input, cache_write, output, reasoning
//	estimate_ratio{flavor}                            histogram of actual / estimated input tokens
//	reserved_units_total{limit}                       units reserved at admission, in the limit's unit
//	refunded_units_total{limit}                       units given back by reconciliation
//	charged_units_total{limit}                        units charged by reconciliation above the reservation
//	spend_usd_total{tenant,model}                     settled cost in USD
//	limit_utilization{limit,tenant}                   token bucket: 1 − remaining / capacity at the last admission;
//	                                                  quota: quota_used / quota_limit (at scrape time, 0 once the
//	                                                  period ends)
//	overhead_seconds                                  histogram of time spent in llmguard, upstream and wait holds excluded
//	upstream_duration_seconds{upstream,code}          histogram of upstream time to response (code: 2xx…5xx)
//	upstream_responses_total{upstream,status}         upstream answers by HTTP status (0: unreachable)
//	store_failure_decisions_total{limit,decision}     fail_open / fail_closed decisions while the store is unavailable
//	budget_warnings_total{limit,tenant}               quota warning thresholds crossed
//	quota_used{limit,tenant}                          a quota's settled use in its current period, after the last
//	                                                  settlement (USD for usd); user- or key-scoped: the tenant's most
//	                                                  used user or key (at most MaxSubjects tracked); global: tenant "";
//	                                                  0 once the period ends, without a request (budgetgauge.go)
//	quota_limit{limit,tenant}                         the quota's amount per period (USD for usd)
//	quota_period_end_timestamp_seconds{limit,tenant}  when the quota's current period ends (unix seconds)
//	quota_exhausted{limit,tenant}                     1 once the quota denied a request it could pay when full, in its
//	                                                  current period at its current amount; else 0 (budgetgauge.go)
//	panics_total{stage}                               panics recovered, by stage (handler, stream, watch, settle,
//	                                                  ledger, metrics; see the Stage constants)
//	request_body_bytes_in_flight                      request-body bytes held now, of max_inflight_body_bytes
//	response_body_bytes_in_flight                     upstream-answer bytes held now (non-streamed answers and their
//	                                                  decoded copies), of max_inflight_response_bytes
//	responses_unread_total{reason}                    answers whose usage was not read, their reservations kept:
//	                                                  budget (relayed unread: max_inflight_response_bytes full),
//	                                                  too_large (over max_response_bytes), decode_budget (a compressed
//	                                                  answer whose decoded copy or zstd window found no room),
//	                                                  decode_window (a zstd window over 8 MiB), undecodable (a coding
//	                                                  not decoded, or broken); streams only for the last three
//	in_flight_requests{limit}                         requests holding a slot of an in-flight limit (unit: concurrent)
//	                                                  on this node now
//	shadow_decisions_total{limit,decision}            a shadow limit's verdicts on requests the real limits admitted:
//	                                                  pass, would_deny, error (the store failed)
//	usage_implausible_total{flavor,figure}            settlements whose usage was above the request's ceiling
//	                                                  (Settlement.Ceiling), charged at it: figure input, output,
//	                                                  web_searches
//	served_tier_unpriced_total{model,tier}            answers served at a dearer tier than asked (tier: priority,
//	                                                  default, flex) that the price table does not price for the
//	                                                  model, charged at the dearest tier it prices
//
// Errors: registration conflicts from reg.
func NewMetrics(reg prometheus.Registerer, o MetricsOptions) (*Metrics, error) {
	if o.MaxTenants <= 0 {
		o.MaxTenants = 100
	}
	if o.MaxModels <= 0 {
		o.MaxModels = 100
	}
	if o.MaxSubjects <= 0 {
		o.MaxSubjects = defaultMaxSubjects
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	budget := newBudgetGauges(o.Now, o.MaxSubjects)
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmguard_" + name, Help: help}, labels)
	}
	m := &Metrics{
		requests: counter("requests_total", "Requests by API flavor, model, outcome and (for denials) the denying limit.",
			"flavor", "model", "outcome", "limit"),
		tokensEstimated: counter("tokens_estimated_total", "Tokens estimated at admission: input counted locally, output reserved.",
			"flavor", "model", "kind"),
		tokens: counter("tokens_total", "Tokens settled after the response, as the ledger records them: reported by the upstream, counted locally when it reported none, or the reservation (input estimated, output reserved) when the answer's usage could not be read.",
			"flavor", "model", "kind"),
		estimateRatio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmguard_estimate_ratio",
			Help:    "Actual input tokens divided by the estimate made at admission (1 = exact).",
			Buckets: []float64{0.5, 0.8, 0.9, 0.95, 0.99, 1, 1.01, 1.05, 1.1, 1.2, 1.5, 2, 5},
		}, []string{"flavor"}),
		reserved:    counter("reserved_units_total", "Units reserved at admission, in the limit's unit (micro-USD for usd limits).", "limit"),
		refunded:    counter("refunded_units_total", "Units given back by reconciliation (the request used less than reserved).", "limit"),
		charged:     counter("charged_units_total", "Units charged by reconciliation above the reservation (the request used more).", "limit"),
		spend:       counter("spend_usd_total", "Settled cost of requests in USD, from token counts and the model's prices.", "tenant", "model"),
		utilization: budget.buckets,
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "llmguard_overhead_seconds",
			Help:    "Time a request spends in llmguard itself (identify, weigh, take, relay setup), upstream time and on_limit: wait holds excluded.",
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
		budgetWarnings: counter("budget_warnings_total", "Quota warning thresholds (warn_at) crossed, once per threshold, period and amount on each node.", "limit", "tenant"),
		budget:         budget,
		panics:         counter("panics_total", "Panics recovered while serving a request, by stage; the request was answered 500 or its stream ended, and settled once.", "stage"),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmguard_request_body_bytes_in_flight",
			Help: "Request-body bytes held in memory now, counted against max_inflight_body_bytes."}),
		answerBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmguard_response_body_bytes_in_flight",
			Help: "Bytes of non-streamed upstream answers (and their decoded copies) held in memory now, counted against max_inflight_response_bytes."}),
		unread: counter("responses_unread_total",
			"Upstream answers relayed without their usage read, their reservations kept, by reason: budget (max_inflight_response_bytes full), too_large (over max_response_bytes), decode_budget (no room to decode a compressed answer), decode_window (a zstd window over 8 MiB), undecodable (a content coding llmguard does not decode, or a broken one). Streams count under the last three.",
			"reason"),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmguard_in_flight_requests",
			Help: "Requests holding a slot of an in-flight limit (unit: concurrent) on this node now; sum over nodes for the limit's use."}, []string{"limit"}),
		shadow: counter("shadow_decisions_total",
			"Verdicts of shadow limits on requests the real limits admitted: pass, would_deny (the shadow bucket could not pay and took nothing) or error.",
			"limit", "decision"),
		implausibleUsage: counter("usage_implausible_total",
			"Settlements whose usage (reported, or counted) was above what the request can plausibly have used (the model's window per call, its choices, its reservation), charged at that ceiling instead, by figure: input, output, web_searches, file_searches, image_tokens, cost (a cost the upstream reports, above the larger of reported_cost_ceiling_usd and the token ceiling's price).",
			"flavor", "figure"),
		unpricedTier: counter("served_tier_unpriced_total",
			"Answers that name a service tier dearer than the one asked for which the price table has no prices for their model (models.<model>.priority unset), charged at the dearest tier it prices instead, by model and tier (priority, default, flex).",
			"model", "tier"),
		tenants: newLabelCap(o.MaxTenants),
		models:  newLabelCap(o.MaxModels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.tokensEstimated, m.tokens, m.estimateRatio, m.reserved, m.refunded,
		m.charged, m.spend, m.budget, m.overhead, m.upstreamSeconds, m.upstreamStatus, m.failures, m.budgetWarnings,
		m.panics, m.bodyBytes, m.answerBytes, m.unread, m.inFlight, m.shadow, m.implausibleUsage, m.unpricedTier} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, st := range stages {
		m.panics.WithLabelValues(st)
	}
	m.cRequests, m.cTokensEstimated, m.cTokens = newSeriesCache(m.requests.WithLabelValues), newSeriesCache(m.tokensEstimated.WithLabelValues),
		newSeriesCache(m.tokens.WithLabelValues)
	m.cReserved, m.cRefunded, m.cCharged = newSeriesCache(m.reserved.WithLabelValues), newSeriesCache(m.refunded.WithLabelValues),
		newSeriesCache(m.charged.WithLabelValues)
	m.cSpend, m.cUpstreamStatus = newSeriesCache(m.spend.WithLabelValues), newSeriesCache(m.upstreamStatus.WithLabelValues)
	m.cEstimateRatio, m.cUpstreamSeconds = newSeriesCache(m.estimateRatio.WithLabelValues), newSeriesCache(m.upstreamSeconds.WithLabelValues)
	m.cUtilization = newSeriesCache(m.utilization.WithLabelValues)
	m.flows = newSeriesCache(func(v ...string) *flowSeries { return &flowSeries{flavor: v[0], model: v[1], tenant: v[2]} })
	m.rules = newSeriesCache(func(v ...string) *ruleSeries { return &ruleSeries{limit: v[0], tenant: v[1]} })
	return m, nil
}

// Request counts one request in requests_total: its flavor, its model's
// label (a priced name, "other", or "" when it names none; capped by
// MetricsOptions.MaxModels), its outcome and, for a denial, the denying
// limit's name ("" otherwise).
func (m *Metrics) Request(f spec.Flavor, model string, outcome Outcome, limit string) {
	if m == nil {
		return
	}
	m.cRequests.get(4, labelValues{f.String(), m.models.get(model), outcome, limit}).Inc() // model: a priced name or "other"
}

// RequestOf is Request for the request admitted (or refused) as x: its
// flavor and model label are x's. An allowed request counted after its
// metrics at admission is counted through x's series bundle (bundles.go),
// without a lookup.
func (m *Metrics) RequestOf(x *Exchange, outcome Outcome, limit string) {
	if m == nil {
		return
	}
	if fs := x.flow; fs != nil && outcome == OutcomeAllowed && limit == "" {
		fs.allowed.get(m.cRequests, 4, labelValues{fs.flavor, fs.model, OutcomeAllowed, ""}).Inc()
		return
	}
	m.Request(x.req.Flavor, x.modelLabel, outcome, limit)
}

// Panicked counts a recovered panic in stage (a Stage constant).
func (m *Metrics) Panicked(stage string) {
	if m != nil {
		m.panics.WithLabelValues(stage).Inc()
	}
}

// ResponseBytesHeld adds delta bytes to the upstream-answer bytes held in
// memory (negative: given back).
func (m *Metrics) ResponseBytesHeld(delta int64) {
	if m != nil {
		m.answerBytes.Add(float64(delta))
	}
}

// ResponseUnread counts an answer whose usage was not read, for reason:
// budget, too_large, decode_budget, decode_window or undecodable (a fixed
// set: the label stays bounded; streams count under the last three).
func (m *Metrics) ResponseUnread(reason string) {
	if m != nil {
		m.unread.WithLabelValues(reason).Inc()
	}
}

// BodyBytesHeld adds delta bytes to the request-body bytes held in memory
// (negative: given back).
func (m *Metrics) BodyBytesHeld(delta int64) {
	if m != nil {
		m.bodyBytes.Add(float64(delta))
	}
}

// admitted records a request's estimate, reservations and the state of its
// limits at admission.
func (m *Metrics) admitted(x *Exchange) {
	if m == nil {
		return
	}
	fs := m.flowOf(x)
	est := x.req.Estimate
	if est.InputTokens > 0 {
		fs.estimated[0].get(m.cTokensEstimated, 3, labelValues{fs.flavor, fs.model, "input"}).Add(float64(est.InputTokens))
	}
	if est.OutputTokens > 0 {
		fs.estimated[1].get(m.cTokensEstimated, 3, labelValues{fs.flavor, fs.model, "output"}).Add(float64(est.OutputTokens))
	}
	for i := range x.rules {
		a := &x.rules[i]
		rs := m.ruleOf(a, fs.tenant)
		if a.Reserved > 0 {
			rs.reserved.get(m.cReserved, 1, labelValues{rs.limit}).Add(float64(a.Reserved))
		}
		// A quota's gauges follow its spend, not this reservation: they
		// are set at settlement (budgetSettled), which reads the mark
		// admit leaves.
		if isQuota(a) && !a.Fallback {
			m.budget.admit(a, fs.tenant)
		}
		if c := a.Limit.Capacity; c > 0 && !a.Limit.IsQuota() {
			// (capacity − remaining) / capacity: the difference of two
			// integers below 2^53 is exact, so 74 of 1000 in use reads
			// 0.074, where 1 − 926/1000 read 0.07399999999999995.
			used := float64(c) - float64(a.Status.Remaining)
			rs.utilization.get(m.cUtilization, 2, labelValues{rs.limit, rs.tenant}).Set(used / float64(c))
		}
	}
}

// budgetSettled keeps, for the budget gauges, the settled use of each
// quota of x (shadow quotas excluded): its level at admission with x's
// reservation replaced by what x really cost (settled[i], in rule i's
// unit), as Options.Alerts is told it. A quota judged by the per-node
// fallback (the store was down for it: Applied.Fallback) is not kept: its
// level is this node's fallback bucket's, not the budget's.
func (m *Metrics) budgetSettled(x *Exchange, settled []int64) {
	if m == nil {
		return
	}
	var tenant string // the tenant label, capped: found once, at the first quota
	var now time.Time
	for i := range x.rules {
		if a := &x.rules[i]; isQuota(a) && !a.Fallback && i < len(settled) {
			if now.IsZero() {
				tenant, now = m.flowIn(x).tenant, m.budget.now()
			}
			m.budget.observe(a, tenant, settledLevel(a, settled[i]), settled[i]-a.Reserved, now)
		}
	}
}

// budgetDenied marks quota rule i of x as having denied x (not a request
// larger than the whole quota) for quota_exhausted. A denial by the
// per-node fallback (the store was down for the rule: Applied.Fallback) is
// not kept: it is this node's fallback bucket's, not the budget's.
func (m *Metrics) budgetDenied(x *Exchange, i int) {
	if m == nil || i < 0 || i >= len(x.rules) || x.rules[i].Fallback {
		return
	}
	if a := &x.rules[i]; isQuota(a) {
		m.budget.deny(a, m.flowIn(x).tenant, m.budget.now())
	}
}

// settled records what a finished request was charged in tokens (u, as
// its ledger record counts them: Exchange.chargedTokens) and cost
// (costMicroUSD), how its input compares with the estimate (when the usage
// is known), and what reconciliation gave back or charged (deltas, each of
// the rule of x at the same position of owners).
func (m *Metrics) settled(x *Exchange, u spec.Usage, costMicroUSD int64, known bool, deltas []bucket.Delta, owners []int) {
	if m == nil {
		return
	}
	fs := m.flowIn(x)
	for i, n := range [len(tokenKinds)]int64{u.InputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.OutputTokens, u.ReasoningTokens} {
		if n > 0 {
			fs.tokens[i].get(m.cTokens, 3, labelValues{fs.flavor, fs.model, tokenKinds[i]}).Add(float64(n))
		}
	}
	if known {
		if est := x.req.Estimate.InputTokens; est > 0 && u.InputTokens > 0 {
			fs.ratio.get(m.cEstimateRatio, 1, labelValues{fs.flavor}).Observe(float64(u.InputTokens) / float64(est))
		}
	}
	if costMicroUSD > 0 {
		fs.spend.get(m.cSpend, 2, labelValues{fs.tenant, fs.model}).Add(float64(costMicroUSD) / 1e6)
	}
	for i, d := range deltas {
		rs := x.rules[owners[i]].series // set by admitted; not written here, where x.rules may be read by the handler
		if rs == nil {
			a := &x.rules[owners[i]]
			rs = m.rules.get(2, labelValues{a.Rule.Name, fs.tenant})
		}
		if d.Units < 0 {
			rs.refunded.get(m.cRefunded, 1, labelValues{rs.limit}).Add(float64(-d.Units))
		} else {
			rs.charged.get(m.cCharged, 1, labelValues{rs.limit}).Add(float64(d.Units))
		}
	}
}

// Upstream counts one upstream answer of the named upstream by HTTP status
// (0: unreachable) and, for an answer, observes d, the time until its
// headers (and body, when read whole).
func (m *Metrics) Upstream(name string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.cUpstreamStatus.get(2, labelValues{name, statusLabel(status)}).Inc()
	if status > 0 { // a failed dial is not a latency: it would pull the percentiles down
		m.cUpstreamSeconds.get(2, labelValues{name, classLabel(status)}).Observe(d.Seconds())
	}
}

// statusLabels are the labels of the HTTP statuses 0 to 599, made once so
// that counting an answer builds no string.
var statusLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

// statusLabel is status as a label value.
func statusLabel(status int) string {
	if status >= 0 && status < len(statusLabels) {
		return statusLabels[status]
	}
	return strconv.Itoa(status)
}

// classLabel is status's class as a label value: "2xx" for 200 to 299.
func classLabel(status int) string {
	switch c := status / 100; {
	case c >= 1 && c <= 5:
		return [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}[c-1]
	default:
		return strconv.Itoa(c) + "xx"
	}
}

// Overhead observes d, the time a request spent in llmguard itself,
// upstream time and on_limit: wait holds excluded; a negative d is ignored.
func (m *Metrics) Overhead(d time.Duration) {
	if m != nil && d >= 0 {
		m.overhead.Observe(d.Seconds())
	}
}

// failure counts the limits of one request decided while the store was
// unavailable. The request itself is counted in requests_total when it is
// answered: fail_closed with the limit that failed closed, fail_open when
// a fail-open one ends.
func (m *Metrics) failure(rules []Applied, decision string) {
	if m == nil {
		return
	}
	for _, a := range rules {
		if (decision == OutcomeFailOpen) == a.Rule.FailOpen {
			m.failures.WithLabelValues(a.Rule.Name, decision).Inc()
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
	for _, c := range []*seriesCache[prometheus.Counter]{m.cReserved, m.cRefunded, m.cCharged} {
		c.reset() // limits a reload dropped are looked up no more
	}
	m.cUtilization.reset()
	m.budget.prepare(rules)
	m.rules.reset()
	m.memo.forgetRules()
	m.prepareMu.Lock()
	defer m.prepareMu.Unlock()
	limits := make(map[string]bool, len(rules))
	for _, r := range rules {
		decision := OutcomeFailClosed
		if r.FailOpen {
			decision = OutcomeFailOpen
		}
		m.failures.WithLabelValues(r.Name, decision)
		limits[r.Name] = true
	}
	for name := range m.failureLimits {
		if !limits[name] { // a limit the reload removed: its series go
			m.failures.DeletePartialMatch(prometheus.Labels{"limit": name})
		}
	}
	m.failureLimits = limits
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

// servedTierUnpriced counts x's answer, served at tier, a tier the price
// table does not price for x's model (served_tier_unpriced_total; model:
// x's label, capped).
func (m *Metrics) servedTierUnpriced(x *Exchange, tier policy.ServiceTier) {
	if m != nil {
		m.unpricedTier.WithLabelValues(m.models.get(x.modelLabel), tier.String()).Inc()
	}
}
