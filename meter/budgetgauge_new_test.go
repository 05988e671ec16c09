package meter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newGaugeMetrics is Metrics on reg whose budget gauges read clock now.
func newGaugeMetrics(t testing.TB, reg prometheus.Registerer, now func() time.Time) *Metrics {
	t.Helper()
	m, err := NewMetrics(reg, MetricsOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
