package app

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/alert"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
)

// openAlerts starts the budget alert notifier of alerts.webhook; nil when
// none is configured. Crossings are claimed in the shared Redis store
// (once per period across the fleet), else in this process. The config is
// read at start-up: a reload does not change it.
func openAlerts(cfg *config.Config, st *stores, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*alert.Notifier, error) {
	w := cfg.Alerts.Webhook
	if w == nil {
		return nil, nil
	}
	if now == nil {
		now = time.Now
	}
	var claimer alert.Claimer = &alert.MemoryClaimer{Now: now}
	if c, ok := st.client.(alert.SetNXer); ok && st.client != nil {
		claimer = &alert.RedisClaimer{Client: c, Now: now}
	}
	format, _ := spec.ParseAlertFormat(w.Format) // Validate refuses another name
	return alert.New(alert.Options{URL: w.URL, Format: format, Thresholds: w.Thresholds, Headers: w.Headers,
		Timeout: time.Duration(w.Timeout), MaxAttempts: w.MaxAttempts, Queue: w.Queue, Claimer: claimer, Now: now,
		Registerer: reg, Logger: log})
}

// alertsOrNil keeps a nil *alert.Notifier from becoming a non-nil
// interface.
func alertsOrNil(n *alert.Notifier) meter.Alerts {
	if n == nil {
		return nil
	}
	return n
}
