package meter

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/policy"
)

// A reload that removes a limit removes its store-failure series (a
// new-user trial saw a removed limit's series stay in /metrics); the
// limits it keeps keep theirs, their counts included.
func TestPrepareDropsRemovedLimitsFailureSeries(t *testing.T) {
	m := newGaugeMetrics(t, prometheus.NewRegistry(), nil)
	m.Prepare([]policy.Rule{{Name: "user-tokens", FailOpen: true}, {Name: "tenant-usd"}})
	m.failures.WithLabelValues("tenant-usd", OutcomeFailClosed).Add(3)
	if n := testutil.CollectAndCount(m.failures); n != 2 {
		t.Fatalf("%d failure series after the first Prepare, want 2", n)
	}
	m.Prepare([]policy.Rule{{Name: "tenant-usd"}})
	if n := testutil.CollectAndCount(m.failures); n != 1 {
		t.Errorf("%d failure series after user-tokens was removed, want 1", n)
	}
	if v := testutil.ToFloat64(m.failures.WithLabelValues("tenant-usd", OutcomeFailClosed)); v != 3 {
		t.Errorf("tenant-usd's fail_closed count %v after the reload, want 3 (kept)", v)
	}
}
