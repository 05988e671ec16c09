package app

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/llmguard/llmguard/bucket"
)

// chargeFlushTimeout bounds one flush of the fallback's charges (each
// store call within it has the guard's reconcile deadline).
const chargeFlushTimeout = 10 * time.Second

// chargeWhenBack flushes cb, the spend the fallback admitted on quotas and
// window counters, to the store, checked every half openFor (at least 50
// ms), so that the charges reach Redis within about that of its return:
// with one breaker (a single Redis) whenever it is closed and the store's
// last call succeeded (lastFailed false); with one breaker per cluster
// master (perMaster) whenever something is owed, each charge holding one
// master's buckets and sent only through a closed breaker (the Guarded
// store rejects a flush's charge to a master whose breaker is not, and
// the flush goes on with the others), so that the healthy masters' charges
// land while one master is still down. The returned func stops it, after
// one last flush when the store is healthy (a node shut down after an
// outage charges what it owes).
func chargeWhenBack(g *bucket.Guarded, cb *bucket.ChargeBack, openFor time.Duration, lastFailed *atomic.Bool, perMaster bool, log *slog.Logger) func() error {
	failLog := &rate.Sometimes{First: 1, Interval: failedTakeLogEvery}
	flush := func() {
		if !cb.Owes() || !perMaster && (g.State() != bucket.BreakerClosed || lastFailed.Load()) {
			return
		}
		before := cb.Stats()
		ctx, cancel := context.WithTimeout(context.Background(), chargeFlushTimeout)
		err := cb.Flush(ctx)
		cancel()
		after := cb.Stats()
		if n := after.Applied - before.Applied; n > 0 {
			log.Info("fallback spend charged to the store: what this node's fallback admitted on quotas and window counters now counts in Redis",
				"charged", n, "dropped_period_ended", after.Dropped[bucket.DropPeriodEnded]-before.Dropped[bucket.DropPeriodEnded],
				"held", after.Held)
		}
		if err != nil {
			failLog.Do(func() {
				log.Warn("could not charge the fallback's spend to the store; held for the next try", "err", err, "held", after.Held)
			})
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(openFor/2, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				flush()
				return
			case <-t.C:
				flush()
			}
		}
	}()
	var once sync.Once
	return func() error {
		once.Do(func() { close(done) })
		wg.Wait()
		return nil
	}
}

// watchCharges exports cb's counters: llmguard_fallback_charges_total{outcome}
// (sent, applied: deltas, one bucket in one period each),
// llmguard_fallback_charges_dropped_total{reason} (bucket.ChargeDrop's
// names) and the gauge llmguard_fallback_charges_held.
func watchCharges(reg prometheus.Registerer, cb *bucket.ChargeBack) {
	reg.MustRegister(&chargeCollector{cb: cb,
		total: prometheus.NewDesc("llmguard_fallback_charges_total",
			"Charges of what a fail-open fallback admitted on quotas and window counters (one bucket in one period each), by outcome: sent to the store, applied by it.",
			[]string{"outcome"}, nil),
		dropped: prometheus.NewDesc("llmguard_fallback_charges_dropped_total",
			"Charges of fallback spend given up, by reason: period_ended (never moved into the next period), full (store.replay_queue pairs held), expired (retried 9 minutes after a send that may have applied), refused.",
			[]string{"reason"}, nil),
		held: prometheus.NewDesc("llmguard_fallback_charges_held",
			"Charges of fallback spend held until the store is back (one bucket in one period each).", nil, nil),
	})
}

// chargeCollector reads a ChargeBack's Stats when scraped.
type chargeCollector struct {
	cb                   *bucket.ChargeBack
	total, dropped, held *prometheus.Desc
}

// Describe sends the families' descriptions.
func (c *chargeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.dropped
	ch <- c.held
}

// Collect sends every series, each label value from the start.
func (c *chargeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.cb.Stats()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(s.Sent), "sent")
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(s.Applied), "applied")
	for _, d := range bucket.ChargeDrops {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped[d]), d.String())
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.Held))
}
