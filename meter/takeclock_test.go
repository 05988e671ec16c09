package meter

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTakeReadsTheClockOnlyForTimedLimits: a take reads the meter's clock
// only when a rule's limit depends on the instant (a quota's window), and
// then once for every such rule; a policy of token buckets alone reads none
// (the store reads its own). Each step admits one request and counts the
// reads of Options.Now; a quota's window still comes from that clock (the
// take after the day ends finds the quota refilled).
func TestTakeReadsTheClockOnlyForTimedLimits(t *testing.T) {
	steps := []struct {
		name   string
		limits string
		reads  int
	}{
		{name: "token buckets only", reads: 0, limits: `  - {name: tpm, scope: user, unit: tokens, rate: 100000, per: 1m}
  - {name: rpm, scope: tenant, unit: requests, rate: 100, per: 1m}
`},
		{name: "a quota among token buckets", reads: 1, limits: `  - {name: tpm, scope: user, unit: tokens, rate: 100000, per: 1m}
  - {name: rpd, scope: user, unit: requests, quota: 1, period: day}
`},
		{name: "two quotas, one read", reads: 1, limits: `  - {name: rpd, scope: user, unit: requests, quota: 1, period: day}
  - {name: usd, scope: tenant, unit: usd, quota: 10, period: month}
`},
	}
	for i, s := range steps {
		tl := newTimeline(t, s.limits)
		reads := 0
		metrics, err := NewMetrics(prometheus.NewRegistry(), MetricsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Options{Store: tl.store, Fallback: tl.fallback, Metrics: metrics,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { reads++; return tl.clock.Now() }})
		if err != nil {
			t.Fatal(err)
		}
		tl.meter = m
		if x := tl.admit(10, 10); x.Verdict() != Admitted {
			t.Fatalf("step %d (%s): %v, want admitted", i, s.name, x.Verdict())
		}
		if reads != s.reads {
			t.Errorf("step %d (%s): the take read the clock %d times, want %d", i, s.name, reads, s.reads)
		}
		if s.reads == 0 {
			continue
		}
		if x := tl.admit(10, 10); x.Verdict() == Admitted {
			t.Fatalf("step %d (%s): a second request within the day's quota of 1 was admitted", i, s.name)
		}
		tl.clock.Set(tl.clock.Now().Add(24 * time.Hour))
		if x := tl.admit(10, 10); x.Verdict() != Admitted {
			t.Fatalf("step %d (%s): the next day: %v, want admitted (the quota's window from the clock)", i, s.name, x.Verdict())
		}
	}
}
