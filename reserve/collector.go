package reserve

import "github.com/prometheus/client_golang/prometheus"

// Collector exports a Learner's state at each scrape:
// llmguard_output_reservation_learned_tokens{model} (the learned quantile
// per completion, in tokens, before the floor and cap; 0 while the model
// has fewer than MinSamples outputs) and
// llmguard_output_reservation_samples{model} (outputs recorded). model is a
// sketch key: a priced name or "other", at most MaxModels of them.
type Collector struct {
	l               *Learner
	learned, counts *prometheus.Desc
}

// NewCollector returns the collector of l; register it on the admin
// registry.
func NewCollector(l *Learner) *Collector {
	return &Collector{l: l,
		learned: prometheus.NewDesc("llmguard_output_reservation_learned_tokens",
			"Learned output reservation per completion (the configured quantile of recent outputs), tokens, before floor and cap.", []string{"model"}, nil),
		counts: prometheus.NewDesc("llmguard_output_reservation_samples",
			"Settled outputs the learned reservation of a model was learned from.", []string{"model"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.learned; ch <- c.counts }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.l.Learned(func(key string, q, n int64) {
		ch <- prometheus.MustNewConstMetric(c.learned, prometheus.GaugeValue, float64(q), key)
		ch <- prometheus.MustNewConstMetric(c.counts, prometheus.GaugeValue, float64(n), key)
	})
}
