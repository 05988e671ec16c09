package app

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
)

// dropLogEvery is the least time between two log lines of one logDrops:
// an outage that drops thousands of reconciliations writes one line per
// dropLogEvery, each with the counts since the line before (before, every
// dropped reconciliation wrote an ERROR line of its own).
const dropLogEvery = 10 * time.Second

// dropLookEvery is how often logDrops reads its counters (atomic loads):
// a first drop is logged within about that.
const dropLookEvery = time.Second

// logDrops writes a WARN line msg whenever the counters read returns (one
// per reason, in reasons' order) have grown since its last line, at most
// once per every (looked at every min(look, every)), with, per reason
// that grew, dropped_<reason>=n since the last line, and the total since
// start. Counters read at the start are not logged. The returned func
// stops it, after a last look (drops at shutdown are logged too).
func logDrops(log *slog.Logger, msg string, reasons []string, read func() []uint64, every, look time.Duration) (stop func() error) {
	last := read()
	var logged time.Time // zero: the first growth is logged at once
	lookNow := func(force bool) {
		cur := read()
		var attrs []any
		var total uint64
		for i, n := range cur {
			total += n
			if n > last[i] {
				attrs = append(attrs, "dropped_"+reasons[i], n-last[i])
			}
		}
		if len(attrs) == 0 || !force && !logged.IsZero() && time.Since(logged) < every {
			return
		}
		log.Warn(msg, append(attrs, "dropped_since_start", total, "next_line_after", every)...)
		last, logged = cur, time.Now()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(min(look, every))
		defer t.Stop()
		for {
			select {
			case <-done:
				lookNow(true)
				return
			case <-t.C:
				lookNow(false)
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

// periodMovedReason is the reason llmguard_reconcile_dropped_total and the
// "reconciliations dropped" line give the reconciliations (settlements,
// voids, fallback charges) the store applied with a quota delta that
// applied to nothing, its period moved on in the store
// (bucket.Redis.PeriodMoved): the store answered, so the AsyncReconciler
// does not count them among its drops.
const periodMovedReason = "period_moved"

// reconcileDropReasons are bucket.AsyncDrops' names, in their order, then
// periodMovedReason.
func reconcileDropReasons() []string {
	out := make([]string, 0, len(bucket.AsyncDrops)+1)
	for _, d := range bucket.AsyncDrops {
		out = append(out, d.String())
	}
	return append(out, periodMovedReason)
}

// chargeDropReasons are bucket.ChargeDrops' names, in their order.
func chargeDropReasons() []string {
	out := make([]string, len(bucket.ChargeDrops))
	for i, d := range bucket.ChargeDrops {
		out[i] = d.String()
	}
	return out
}

// reconcileDropMsg is the WARN line logDrops writes for
// reconcileDropReasons.
const reconcileDropMsg = "reconciliations dropped: their deltas never reach the store, or (period_moved) reach a quota whose period has moved on there and apply to nothing (llmguard_reconcile_dropped_total{reason})"

// reconcileDropped reads a's drops in bucket.AsyncDrops' order (a nil,
// the memory backend's, has none: zeros), then moved (the store's
// PeriodMoved; nil reads 0): reconcileDropReasons' counts.
func reconcileDropped(a *bucket.AsyncReconciler, moved func() uint64) func() []uint64 {
	return func() []uint64 {
		out := make([]uint64, 0, len(bucket.AsyncDrops)+1)
		var s bucket.AsyncStats
		if a != nil {
			s = a.Stats()
		}
		for _, d := range bucket.AsyncDrops {
			out = append(out, s.DroppedBy[d])
		}
		var n uint64
		if moved != nil {
			n = moved()
		}
		return append(out, n)
	}
}

// chargeDropped reads cb's drops in bucket.ChargeDrops' order.
func chargeDropped(cb *bucket.ChargeBack) func() []uint64 {
	return func() []uint64 {
		s := cb.Stats()
		out := make([]uint64, len(bucket.ChargeDrops))
		for i, d := range bucket.ChargeDrops {
			out[i] = s.Dropped[d]
		}
		return out
	}
}

// reconcileDropCollector exports llmguard_reconcile_dropped_total{reason}
// (reasons, each from the start), read when scraped: read returns one
// count per reason, in reasons' order.
type reconcileDropCollector struct {
	desc    *prometheus.Desc
	reasons []string
	read    func() []uint64
}

// Describe sends the family's description.
func (c *reconcileDropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect sends one series per reason.
func (c *reconcileDropCollector) Collect(ch chan<- prometheus.Metric) {
	for i, n := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), c.reasons[i])
	}
}
