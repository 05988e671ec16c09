package keystore

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the key store's collectors:
//
//	llmguard_key_store_resyncs_total{result}               whole reads of the registry: ok | error
//	llmguard_key_store_notifications_total{result}         notified records: applied | stale (older than the cached) | invalid
//	llmguard_key_store_last_resync_timestamp_seconds       Unix time of the last whole read that worked
//	llmguard_key_store_subscribed                          1 while the change subscription is confirmed, else 0
//
// A nil *Metrics counts nothing. Safe for concurrent use.
type Metrics struct {
	resyncs    *prometheus.CounterVec
	notes      *prometheus.CounterVec
	lastResync prometheus.Gauge
	subscribed prometheus.Gauge
}

// NewMetrics registers the key store's collectors with reg. Errors: reg's
// (a collector registered twice).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_key_store_resyncs_total",
			Help: "Whole reads of the key registry (at subscription, every key_store.resync), by result: ok or error.",
		}, []string{"result"}),
		notes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_key_store_notifications_total",
			Help: "Key changes received by notification, by result: applied, stale (not newer than the node's copy) or invalid.",
		}, []string{"result"}),
		lastResync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmguard_key_store_last_resync_timestamp_seconds",
			Help: "Unix time of the last whole read of the key registry that worked.",
		}),
		subscribed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llmguard_key_store_subscribed",
			Help: "1 while this node's subscription to key changes is confirmed, 0 otherwise.",
		}),
	}
	for _, c := range []prometheus.Collector{m.resyncs, m.notes, m.lastResync, m.subscribed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"ok", "error"} {
		m.resyncs.WithLabelValues(r)
	}
	for _, r := range []string{"applied", "stale", "invalid"} {
		m.notes.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) resynced(ok bool, at time.Time) {
	if m == nil {
		return
	}
	if !ok {
		m.resyncs.WithLabelValues("error").Inc()
		return
	}
	m.resyncs.WithLabelValues("ok").Inc()
	m.lastResync.Set(float64(at.UnixNano()) / 1e9)
}

func (m *Metrics) notified(result string) {
	if m != nil {
		m.notes.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) setSubscribed(on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.subscribed.Set(v)
}
