package ledger

import "github.com/prometheus/client_golang/prometheus"

// Sinks, the values of the sink label.
const (
	sinkFile  = "file"
	sinkRedis = "redis"
)

// metrics are a Writer's Prometheus collectors. They exist (and count) even
// when no Registerer is given.
type metrics struct {
	dropped prometheus.Counter
	records *prometheus.CounterVec
	errors  *prometheus.CounterVec

	fileRecords, redisRecords prometheus.Counter
	fileErrors, redisErrors   prometheus.Counter
}

// newMetrics builds the collectors and, when reg is not nil, registers them:
//
//	llmguard_ledger_dropped_total           records Write refused: buffer full, or Writer closed
//	llmguard_ledger_records_total{sink}     records written to the file / added to the stream
//	llmguard_ledger_errors_total{sink}      records a sink failed to write (file: write error;
//	                                        redis: XADD failed, Redis known down, or its queue full)
//
// Errors: registration conflicts from reg.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmguard_ledger_dropped_total",
			Help: "Ledger records dropped by Write because the buffer was full (or the writer closed); each is a forwarded request missing from every sink.",
		}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_ledger_records_total",
			Help: "Ledger records written, by sink (file, redis).",
		}, []string{"sink"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_ledger_errors_total",
			Help: "Ledger records a sink failed to write, by sink (file: write error; redis: XADD failed, Redis down, or its queue full).",
		}, []string{"sink"}),
	}
	m.fileRecords = m.records.WithLabelValues(sinkFile)
	m.redisRecords = m.records.WithLabelValues(sinkRedis)
	m.fileErrors = m.errors.WithLabelValues(sinkFile)
	m.redisErrors = m.errors.WithLabelValues(sinkRedis)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.dropped, m.records, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
