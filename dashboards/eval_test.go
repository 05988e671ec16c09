package dashboards

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// scrapeInterval is the synthetic interval between the workload's scrapes
// in the TSDB: the workload takes seconds, but the samples are stored as a
// Prometheus scraping every 15 s would have stored them, the last one now.
const scrapeInterval = 15 * time.Second

// tsdb holds the workload's scrapes for the query engine.
type tsdb struct {
	db     *memStorage
	engine *promql.Engine
	times  []time.Time // of each scrape
	phases []string
}

// loadTSDB stores every scrape, with the job and instance labels
// Prometheus adds, histograms and summaries as their classic series.
func loadTSDB(t *testing.T, r *run) *tsdb {
	t.Helper()
	end := time.Now().Truncate(time.Second)
	s := &tsdb{db: &memStorage{series: map[string]*memSeries{}}, engine: promql.NewEngine(promql.EngineOpts{
		MaxSamples: 1_000_000, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute,
		EnableAtModifier: true, EnableNegativeOffset: true,
	})}
	for i, sc := range r.scrapes {
		ts := end.Add(-time.Duration(len(r.scrapes)-1-i) * scrapeInterval)
		s.times, s.phases = append(s.times, ts), append(s.phases, sc.phase)
		tp := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := tp.TextToMetricFamilies(bytes.NewReader(sc.text))
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, smp := range samplesOf(mf, m) {
					lb := labels.NewBuilder(labels.EmptyLabels())
					lb.Set("job", "llmguard")
					lb.Set("instance", r.instance)
					for _, lp := range m.GetLabel() {
						lb.Set(lp.GetName(), lp.GetValue())
					}
					for k, v := range smp.extra {
						lb.Set(k, v)
					}
					lb.Set(model.MetricNameLabel, smp.name)
					s.db.append(lb.Labels(), ts.UnixMilli(), smp.v)
				}
			}
		}
	}
	return s
}

type sample struct {
	name  string
	extra map[string]string
	v     float64
}

// samplesOf expands a metric into the classic series Prometheus stores.
func samplesOf(mf *dto.MetricFamily, m *dto.Metric) []sample {
	name := mf.GetName()
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return []sample{{name: name, v: m.GetCounter().GetValue()}}
	case dto.MetricType_GAUGE:
		return []sample{{name: name, v: m.GetGauge().GetValue()}}
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		out := []sample{{name: name + "_sum", v: h.GetSampleSum()}, {name: name + "_count", v: float64(h.GetSampleCount())}}
		inf := false
		for _, b := range h.GetBucket() {
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
			out = append(out, sample{name: name + "_bucket", extra: map[string]string{"le": formatLe(b.GetUpperBound())}, v: float64(b.GetCumulativeCount())})
		}
		if !inf {
			out = append(out, sample{name: name + "_bucket", extra: map[string]string{"le": "+Inf"}, v: float64(h.GetSampleCount())})
		}
		return out
	case dto.MetricType_SUMMARY:
		sm := m.GetSummary()
		out := []sample{{name: name + "_sum", v: sm.GetSampleSum()}, {name: name + "_count", v: float64(sm.GetSampleCount())}}
		for _, q := range sm.GetQuantile() {
			out = append(out, sample{name: name, extra: map[string]string{"quantile": formatLe(q.GetQuantile())}, v: q.GetValue()})
		}
		return out
	default:
		return []sample{{name: name, v: m.GetUntyped().GetValue()}}
	}
}

func formatLe(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// eval runs expr at ts and returns the result's samples.
func (s *tsdb) eval(expr string, ts time.Time) (promql.Vector, error) {
	ctx := context.Background()
	q, err := s.engine.NewInstantQuery(ctx, s.db, nil, expr, ts)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V}}, nil
	}
	return nil, fmt.Errorf("unexpected result type %s", res.Value.Type())
}

// unmatched returns the selectors of e that match no series: what the
// workload did not exercise.
func (s *tsdb) unmatched(e parser.Expr) []string {
	var out []string
	for _, vs := range selectors(e) {
		if len(s.db.matching(vs.LabelMatchers)) == 0 {
			out = append(out, vs.String())
		}
	}
	return out
}

// describe summarises a result for the report.
func describe(v promql.Vector) string {
	if len(v) == 0 {
		return "no data"
	}
	var parts []string
	for i, smp := range v {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("… %d series", len(v)))
			break
		}
		ls := smp.Metric.DropMetricName()
		ls = labels.NewBuilder(ls).Del("instance", "job").Labels()
		parts = append(parts, fmt.Sprintf("%s %.4g", ls, smp.F))
	}
	return strings.Join(parts, ", ")
}

func allNaN(v promql.Vector) bool {
	for _, smp := range v {
		if !math.IsNaN(smp.F) {
			return false
		}
	}
	return len(v) > 0
}
