package app

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// leaseCollector exports a Leased store's counts (DESIGN.md §9), by limit:
//
//	llmguard_lease_taken_total{limit}            leases taken from the shared bucket
//	llmguard_lease_taken_units_total{limit}      units taken for leases
//	llmguard_lease_returned_total{limit}         returns of unused units (expiry, reload, shutdown, a denial's deductions)
//	llmguard_lease_returned_units_total{limit}   units given back
//	llmguard_lease_lost_units_total{limit}       of those, units whose return failed (regained by refill)
//	llmguard_lease_served_total{limit}           admissions served from a lease, without a store call
//	llmguard_lease_units_outstanding{limit}      units held in leases or on their way back
//
// Units are the limit's (tokens, requests, micro-USD). Every leased limit of
// the config at start-up is exported from the start, at zero.
type leaseCollector struct {
	l      *bucket.Leased
	labels []string // exported even before their first lease
	descs  map[string]*prometheus.Desc
}

func newLeaseCollector(l *bucket.Leased, pol *policy.Policy) *leaseCollector {
	c := &leaseCollector{l: l, descs: map[string]*prometheus.Desc{}}
	for _, r := range pol.Rules() {
		if r.Lease.Size > 0 {
			c.labels = append(c.labels, r.Lease.Label)
		}
	}
	for name, help := range map[string]string{
		"llmguard_lease_taken_total":          "Leases taken from the shared bucket, by limit.",
		"llmguard_lease_taken_units_total":    "Units taken from the shared bucket for leases, in the limit's units (usd: micro-USD).",
		"llmguard_lease_returned_total":       "Returns of unused lease units to the shared bucket (expiry, reload, shutdown, a denied request's deductions).",
		"llmguard_lease_returned_units_total": "Unused lease units given back to the shared bucket, in the limit's units.",
		"llmguard_lease_lost_units_total":     "Lease units whose return failed: lost to the shared bucket until it refills (under-admission).",
		"llmguard_lease_served_total":         "Admissions of a leased limit served from this node's lease, without a store call.",
		"llmguard_lease_units_outstanding":    "Units taken from the shared bucket for leases and neither admitted nor given back yet, in the limit's units.",
	} {
		c.descs[name] = prometheus.NewDesc(name, help, []string{"limit"}, nil)
	}
	return c
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.l.Stats()
	for _, label := range c.labels {
		if _, ok := stats[label]; !ok {
			stats[label] = bucket.LeaseStats{}
		}
	}
	for _, label := range slices.Sorted(maps.Keys(stats)) {
		st := stats[label]
		counter := func(name string, v uint64) {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, float64(v), label)
		}
		counter("llmguard_lease_taken_total", st.Taken)
		counter("llmguard_lease_taken_units_total", st.TakenUnits)
		counter("llmguard_lease_returned_total", st.Returned)
		counter("llmguard_lease_returned_units_total", st.ReturnedUnits)
		counter("llmguard_lease_lost_units_total", st.LostUnits)
		counter("llmguard_lease_served_total", st.Served)
		ch <- prometheus.MustNewConstMetric(c.descs["llmguard_lease_units_outstanding"], prometheus.GaugeValue, float64(st.Outstanding), label)
	}
}
