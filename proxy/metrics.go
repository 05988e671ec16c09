package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a request, the values of the outcome label.
const (
	outcomeAllowed       = "allowed"
	outcomeLimited       = "limited"
	outcomeTooLarge      = "too_large"
	outcomeUnauthorized  = "unauthorized"
	outcomeUpstreamError = "upstream_error"
	outcomeFailOpen      = "fail_open"
	outcomeFailClosed    = "fail_closed"
)

func outcomeFor(status int) string {
	if status >= 500 {
		return outcomeUpstreamError
	}
	return outcomeAllowed
}

// Metrics are the proxy's Prometheus collectors. A nil *Metrics records
// nothing. Safe for concurrent use.
type Metrics struct {
	requests    *prometheus.CounterVec
	takeSeconds prometheus.Histogram
	failures    *prometheus.CounterVec
}

// NewMetrics registers the proxy's collectors on reg:
//
//	llmguard_requests_total{flavor,outcome}      counter
//	llmguard_decision_duration_seconds           histogram of store takes
//	llmguard_store_failure_decisions_total{limit,decision}
//	                                             fail_open / fail_closed decisions while the store is unavailable
//
// Errors: registration conflicts from reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_requests_total",
			Help: "Requests seen by the proxy, by API flavor and outcome (allowed, limited, too_large, unauthorized, upstream_error).",
		}, []string{"flavor", "outcome"}),
		takeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "llmguard_decision_duration_seconds",
			Help:    "Time to take a request's cost from its buckets (one store call).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025},
		}),
	}
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmguard_store_failure_decisions_total",
		Help: "Decisions made while the store was unavailable, by limit: fail_open (checked against the node's fallback bucket) or fail_closed (503).",
	}, []string{"limit", "decision"})
	for _, c := range []prometheus.Collector{m.requests, m.takeSeconds, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) request(f Flavor, _ string, outcome string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(f.String(), outcome).Inc()
}

func (m *Metrics) decision(d time.Duration) {
	if m == nil {
		return
	}
	m.takeSeconds.Observe(d.Seconds())
}

// failure counts one request decided while the store was unavailable.
func (m *Metrics) failure(f Flavor, rules []applied, decision string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(f.String(), decision).Inc()
	for _, a := range rules {
		if (decision == outcomeFailOpen) == a.rule.FailOpen {
			m.failures.WithLabelValues(a.rule.Name, decision).Inc()
		}
	}
}
