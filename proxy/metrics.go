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
}

// NewMetrics registers the proxy's collectors on reg:
//
//	llmguard_requests_total{flavor,outcome}      counter
//	llmguard_decision_duration_seconds           histogram of store takes
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
	for _, c := range []prometheus.Collector{m.requests, m.takeSeconds} {
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
