package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// gathered is the value of family's series whose labels include want, and
// whether there is one.
func gathered(t *testing.T, reg *prometheus.Registry, family string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// A node whose Redis is down and that serves no request probes the store:
// those takes are the probe's, counted as op "probe", not as failed
// request takes, and not logged as a request served by the fallback (an
// idle node logged "store take failed: this request's …" and counted
// store_errors_total{op="take"} with no request at all).
func TestIdleNodeProbeIsNotARequestTake(t *testing.T) {
	var out syncBuffer
	_, a := idleAppRedisDown(t, &out)
	probes := 0.0
	for i := 0; i < 600 && probes < 2; i++ { // the probe runs every 100 ms
		time.Sleep(50 * time.Millisecond)
		for _, kind := range []string{"timeout", "connection", "other"} {
			v, _ := gathered(t, a.Registry, "llmguard_store_errors_total", map[string]string{"op": "probe", "kind": kind})
			probes += v
		}
	}
	if probes < 2 {
		t.Fatalf("no failed probe counted after 600 polls: %v", probes)
	}
	for _, kind := range []string{"timeout", "connection", "other"} {
		if v, _ := gathered(t, a.Registry, "llmguard_store_errors_total", map[string]string{"op": "take", "kind": kind}); v != 0 {
			t.Errorf("store_errors_total{op=take,kind=%s} = %v on a node that served no request", kind, v)
		}
	}
	if strings.Contains(out.String(), "store take failed") {
		t.Errorf("an idle node logged a request's failed take:\n%s", out.String())
	}
	// The control: a request's own take while Redis is down still counts
	// as op take (a hook that called every take the probe's would pass the
	// checks above).
	before := 0.0
	for _, kind := range []string{"timeout", "connection", "other"} {
		v, _ := gathered(t, a.Registry, "llmguard_store_errors_total", map[string]string{"op": "take", "kind": kind})
		before += v
	}
	a.stores.main.Take(context.Background(), "", []bucket.Item{{Key: "llmguard:{t}:control", Limit: bucket.Limit{Capacity: 1, Rate: 1, Per: time.Second}, Cost: 1}})
	after := 0.0
	for _, kind := range []string{"timeout", "connection", "other"} {
		v, _ := gathered(t, a.Registry, "llmguard_store_errors_total", map[string]string{"op": "take", "kind": kind})
		after += v
	}
	if after <= before {
		t.Errorf("a request's take while Redis is down: store_errors_total{op=take} %v → %v, want it counted", before, after)
	}
}

// The outage's over-admission gauge follows a reload: a fail-open limit's
// new rate, a new fail-open limit, and none for a limit made fail-closed
// (they were the start-up config's).
func TestOverAdmissionFactorFollowsReload(t *testing.T) {
	srv := redistest.Shared(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	write := func(limits string) {
		y := baseConfig(t, "http://127.0.0.1:1", limits+fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", nodes: 4}\n", srv.Addr()))
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`
limits:
  - {name: a, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
  - {name: b, scope: user, unit: requests, rate: 10, per: 1m, on_failure: open}
`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, discardLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	factor := func(limit string) (float64, bool) {
		return gathered(t, a.Registry, "llmguard_fallback_over_admission_factor", map[string]string{"limit": limit})
	}
	if _, ok := factor("a"); !ok {
		t.Fatal("no over-admission factor for fail-open limit a")
	}
	b0, ok := factor("b")
	if !ok {
		t.Fatal("no over-admission factor for fail-open limit b")
	}
	write(`
limits:
  - {name: a, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: closed}
  - {name: b, scope: user, unit: requests, rate: 2, per: 1m, on_failure: open}
  - {name: c, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
`)
	if err := a.Reload(path); err != nil {
		t.Fatal(err)
	}
	if v, ok := factor("a"); ok {
		t.Errorf("limit a, now fail-closed, still has a factor %v", v)
	}
	if _, ok := factor("c"); !ok {
		t.Error("no over-admission factor for limit c, added by the reload")
	}
	if b1, _ := factor("b"); b1 == b0 {
		t.Errorf("limit b's factor stayed %v after its rate went from 10 to 2 a minute over 4 nodes", b1)
	}
}
