package dashboards

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmguard/llmguard/meter"
)

// pendingQuota are the quota gauges being added with calendar quotas, with
// their labels. Until llmguard exports any llmguard_quota_* metric the
// dashboards may use them unexported; once it does, each must be exported
// under exactly this name.
var pendingQuota = map[string][]string{
	"llmguard_quota_used":                         {"limit", "tenant"},
	"llmguard_quota_limit":                        {"limit", "tenant"},
	"llmguard_quota_period_end_timestamp_seconds": {"limit", "tenant"},
}

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = []string{"instance", "job"}

// family is a metric family llmguard exports.
type family struct {
	name   string
	typ    dto.MetricType
	labels map[string]bool // label names, scrape labels excluded
	// how the tests know of it: "scraped" (it had samples), "HELP/TYPE"
	// (announced without samples), or "declared" (registered by
	// meter.NewMetrics, not yet emitted by the workload)
	source string
}

// exports are the metrics llmguard exports, by series name: a histogram x
// is exported as x_bucket, x_sum and x_count, a summary as x, x_sum and
// x_count.
type exports map[string]*family

func (e exports) add(f *family) {
	names := []string{f.name}
	switch f.typ {
	case dto.MetricType_HISTOGRAM:
		names = []string{f.name + "_bucket", f.name + "_sum", f.name + "_count"}
	case dto.MetricType_SUMMARY:
		names = append(names, f.name+"_sum", f.name+"_count")
	}
	for _, n := range names {
		if old, ok := e[n]; ok {
			for l := range f.labels {
				old.labels[l] = true
			}
			continue
		}
		e[n] = f
	}
}

// labelsOf returns the label names a series of name can carry.
func (e exports) labelsOf(name string) map[string]bool {
	out := map[string]bool{model.MetricNameLabel: true}
	for _, l := range scrapeLabels {
		out[l] = true
	}
	if f, ok := e[name]; ok {
		for l := range f.labels {
			out[l] = true
		}
		if f.typ == dto.MetricType_HISTOGRAM && strings.HasSuffix(name, "_bucket") {
			out["le"] = true
		}
		if f.typ == dto.MetricType_SUMMARY && name == f.name {
			out["quantile"] = true
		}
	} else {
		for _, l := range pendingQuota[name] {
			out[l] = true
		}
	}
	return out
}

// quotaExported lists the llmguard_quota_* series llmguard exports.
func (e exports) quotaExported() []string {
	var out []string
	for n := range e {
		if strings.HasPrefix(n, "llmguard_quota_") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

var typeLine = regexp.MustCompile(`^# TYPE (\S+) (\w+)`)

// exportsOf gathers what llmguard exports from three sources, all
// llmguard's own: the samples of every scrape; HELP/TYPE lines of families
// scraped without samples; and the collectors meter.NewMetrics registers,
// so that a family the workload never touched (a vector without children
// is not exposed at all) still counts, with its labels.
func exportsOf(t *testing.T, r *run) exports {
	t.Helper()
	e := exports{}
	for _, s := range r.scrapes {
		tp := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := tp.TextToMetricFamilies(bytes.NewReader(s.text))
		if err != nil {
			t.Fatalf("scrape %q: %v", s.phase, err)
		}
		for name, mf := range mfs {
			f := &family{name: name, typ: mf.GetType(), labels: map[string]bool{}, source: "scraped"}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					f.labels[lp.GetName()] = true
				}
			}
			e.add(f)
		}
		sc := bufio.NewScanner(bytes.NewReader(s.text))
		for sc.Scan() {
			if m := typeLine.FindStringSubmatch(sc.Text()); m != nil && mfs[m[1]] == nil {
				typ := dto.MetricType_value[strings.ToUpper(m[2])]
				e.add(&family{name: m[1], typ: dto.MetricType(typ), labels: map[string]bool{}, source: "HELP/TYPE"})
			}
		}
	}
	for _, f := range declaredByProxy(t) {
		if _, ok := e[f.name]; !ok {
			if _, ok := e[f.name+"_bucket"]; !ok {
				e.add(f)
			}
		}
	}
	return e
}

// captureRegisterer keeps what is registered on it.
type captureRegisterer struct{ cs []prometheus.Collector }

func (c *captureRegisterer) Register(col prometheus.Collector) error {
	c.cs = append(c.cs, col)
	return nil
}

func (c *captureRegisterer) MustRegister(cs ...prometheus.Collector) { c.cs = append(c.cs, cs...) }
func (c *captureRegisterer) Unregister(prometheus.Collector) bool    { return false }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// declaredByProxy returns the families meter.NewMetrics registers, read
// from their descriptors.
func declaredByProxy(t *testing.T) []*family {
	t.Helper()
	var reg captureRegisterer
	if _, err := meter.NewMetrics(&reg, meter.MetricsOptions{}); err != nil {
		t.Fatal(err)
	}
	var out []*family
	for _, c := range reg.cs {
		typ := dto.MetricType_UNTYPED
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			typ = dto.MetricType_HISTOGRAM
		case *prometheus.GaugeVec, prometheus.Gauge:
			typ = dto.MetricType_GAUGE
		case *prometheus.CounterVec, prometheus.Counter:
			typ = dto.MetricType_COUNTER
		}
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			n := descName.FindStringSubmatch(s)
			if n == nil {
				t.Fatalf("cannot read the name of %s", s)
			}
			f := &family{name: n[1], typ: typ, labels: map[string]bool{}, source: "declared"}
			if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, name := range strings.Split(l[1], ",") {
					f.labels[strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")] = true
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// checkExported checks that every metric q reads is exported and that
// every label it matches, groups by or joins on is one those metrics
// carry. It returns the pending quota gauges q was allowed to use
// unexported, and the problems.
func checkExported(q *query, e exports) (pending []string, errs []error) {
	quota := e.quotaExported()
	for _, vs := range selectors(q.parsed) {
		name := metricName(vs)
		if _, ok := e[name]; !ok {
			switch _, isQuota := pendingQuota[name]; {
			case isQuota && len(quota) == 0:
				pending = append(pending, name)
			case isQuota:
				errs = append(errs, fmt.Errorf("%s: %s is not exported, but llmguard now exports the quota metrics %v: renamed? (dashboards and alerts expect %s)",
					q.where, name, quota, strings.Join(sortedKeys(pendingQuota), ", ")))
				continue
			default:
				errs = append(errs, fmt.Errorf("%s: llmguard does not export %s", q.where, name))
				continue
			}
		}
		have := e.labelsOf(name)
		for _, m := range vs.LabelMatchers {
			if !have[m.Name] {
				errs = append(errs, fmt.Errorf("%s: %s has no label %q (it has %v)", q.where, name, m.Name, sortedKeys(have)))
			}
		}
	}
	parser.Inspect(q.parsed, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			if !n.Without {
				errs = append(errs, labelsUnder(q, e, fmt.Sprintf("%s by", n.Op), n.Grouping, n.Expr)...)
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && vm.On && len(vm.MatchingLabels) > 0 {
				errs = append(errs, labelsUnder(q, e, "on", vm.MatchingLabels, n.LHS)...)
				errs = append(errs, labelsUnder(q, e, "on", vm.MatchingLabels, n.RHS)...)
			}
		}
		return nil
	})
	return pending, errs
}

// labelsUnder checks that each of labels is carried by some metric read
// under e (an expression that reads no metric is not checked).
func labelsUnder(q *query, ex exports, clause string, labels []string, e parser.Expr) []error {
	have := map[string]bool{}
	var names []string
	for _, vs := range selectors(e) {
		names = append(names, metricName(vs))
		for l := range ex.labelsOf(metricName(vs)) {
			have[l] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	var errs []error
	for _, l := range labels {
		if !have[l] {
			errs = append(errs, fmt.Errorf("%s: %s (%s): none of %v has label %q", q.where, clause, strings.Join(labels, ", "), names, l))
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
