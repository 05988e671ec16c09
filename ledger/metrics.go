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
	pending                   *prometheus.GaugeVec
	redisPending              prometheus.Gauge

	tally tally // Writer.Health's figures
}

// fileLost counts n records the file sink failed to write.
func (m *metrics) fileLost(n int) {
	m.fileErrors.Add(float64(n))
	m.tally.lost.Add(uint64(n))
}

// redisLost counts n records the stream sink gave up.
func (m *metrics) redisLost(n int) {
	m.redisErrors.Add(float64(n))
	m.tally.lost.Add(uint64(n))
}

// redisPendingAdd moves the count of records kept for the stream by n
// (negative: taken by Redis, or given up).
func (m *metrics) redisPendingAdd(n int) {
	m.redisPending.Add(float64(n))
	m.tally.pending.Add(int64(n))
}

// newMetrics builds the collectors and, when reg is not nil, registers them.
// The series of a sink are made (at zero) only for the sinks the writer has,
// file and redis saying which, so that /metrics names no sink that is not
// configured; the counters of a sink not made stay nil and are never used:
//
//	llmguard_ledger_dropped_total           records Write refused: buffer full, or Writer closed
//	llmguard_ledger_records_total{sink}     records written to the file / added to the stream
//	llmguard_ledger_errors_total{sink}      records a sink failed to write (file: write error;
//	                                        redis: given up past the retry bounds, or at close)
//	llmguard_ledger_pending{sink}           records kept in memory to be sent again (redis)
//
// Errors: registration conflicts from reg.
func newMetrics(reg prometheus.Registerer, file, redis bool) (*metrics, error) {
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
			Help: "Ledger records a sink failed to write, by sink (file: write error; redis: given up after retries, past the retry buffer's bytes or age, or at shutdown).",
		}, []string{"sink"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmguard_ledger_pending",
			Help: "Ledger records kept in memory to be sent to a sink again (redis: while Redis does not take them).",
		}, []string{"sink"}),
	}
	if file {
		m.fileRecords = m.records.WithLabelValues(sinkFile)
		m.fileErrors = m.errors.WithLabelValues(sinkFile)
	}
	if redis {
		m.redisRecords = m.records.WithLabelValues(sinkRedis)
		m.redisErrors = m.errors.WithLabelValues(sinkRedis)
		m.redisPending = m.pending.WithLabelValues(sinkRedis)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.dropped, m.records, m.errors, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
