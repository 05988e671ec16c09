package dashboards

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// rulesFile is the alerting rules file next to the dashboards.
const rulesFile = "alerts.yml"

// query is one PromQL expression found in a dashboard or the rules file.
type query struct {
	where string // e.g. `overview.json panel 7 "Requests by outcome" target A`
	raw   string // as written, Grafana variables included
	expr  string // variables substituted: what Prometheus would receive
	alert string // the alert's name, for a rule
	// labelValues is set for a Grafana label_values(metric, label) variable
	// query, which is not PromQL: expr is then the equivalent
	// `group by (label) (metric)`.
	labelValues *labelValues
	parsed      parser.Expr
}

type labelValues struct{ metric, label string }

// vars are the values Grafana variables take in the tests: tenant is "All"
// (the variable's allValue), and the interval variables match the
// workload's synthetic 15 s scrape interval: $__rate_interval is 4 ×
// scrape, as Grafana computes it, and $__range covers every scrape.
var vars = map[string]string{
	"tenant":             ".*",
	"__rate_interval":    "1m",
	"__interval":         "15s",
	"__range":            "1h",
	"__range_s":          "3600",
	"__range_ms":         "3600000",
	"__interval_ms":      "15000",
	"__rate_interval_ms": "60000",
}

// varRef matches the Grafana variable syntaxes: ${name}, ${name:format},
// $name and [[name]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// substitute replaces the Grafana variables in s. Errors: a variable that
// is not in vals.
func substitute(s string, vals map[string]string) (string, error) {
	var unknown []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		sm := varRef.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		v, ok := vals[name]
		if !ok {
			unknown = append(unknown, m)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variables %v", unknown)
	}
	return out, nil
}

// dashboard is the part of a Grafana dashboard model the tests read.
type dashboard struct {
	file          string
	UID           string            `json:"uid"`
	Title         string            `json:"title"`
	SchemaVersion int               `json:"schemaVersion"`
	Tags          []string          `json:"tags"`
	Inputs        []json.RawMessage `json:"__inputs"`
	Panels        []panel           `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int      `json:"id"`
	Type       string   `json:"type"`
	Title      string   `json:"title"`
	GridPos    *gridPos `json:"gridPos"`
	Datasource *dsRef   `json:"datasource"`
	Targets    []target `json:"targets"`
	Panels     []panel  `json:"panels"` // a collapsed row's panels
}

type gridPos struct{ H, W, X, Y int }

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	Expr       string `json:"expr"`
	RefID      string `json:"refId"`
	Datasource *dsRef `json:"datasource"`
}

type variable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": …} for Prometheus query variables
	Definition string          `json:"definition"`
	Datasource *dsRef          `json:"datasource"`
	AllValue   string          `json:"allValue"`
}

// queryText returns a query variable's query, whichever shape it has.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil && o.Query != "" {
		return o.Query
	}
	return v.Definition
}

// allPanels returns the dashboard's panels, those inside collapsed rows
// included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// loadDashboards reads every *.json file in the package directory.
func loadDashboards(t *testing.T) []*dashboard {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no dashboards (*.json) found")
	}
	sort.Strings(files)
	var out []*dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := &dashboard{file: f}
		if err := json.Unmarshal(b, d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// loadRules parses the rules file as Prometheus does (unknown fields,
// templates and expressions checked).
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

var promqlParser = parser.NewParser(parser.Options{})

// labelValuesCall matches Grafana's label_values(metric, label); a metric
// with a selector, label_values(metric{…}, label), is matched too.
var labelValuesCall = regexp.MustCompile(`^\s*label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\)\s*$`)

// collectQueries returns every expression of the dashboards and the rules,
// variables substituted with vals and parsed. Problems are reported on t.
func collectQueries(t *testing.T, dashboards []*dashboard, rules *rulefmt.RuleGroups, vals map[string]string) []*query {
	t.Helper()
	var out []*query
	add := func(q *query) {
		expr, err := substitute(q.raw, vals)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			return
		}
		if q.labelValues == nil {
			q.expr = expr
		} else {
			m := labelValuesCall.FindStringSubmatch(expr)
			q.labelValues = &labelValues{metric: m[1], label: m[2]}
			q.expr = fmt.Sprintf("group by (%s) (%s)", m[2], m[1])
		}
		q.parsed, err = promqlParser.ParseExpr(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			return
		}
		if typ := q.parsed.Type(); typ != parser.ValueTypeVector && typ != parser.ValueTypeScalar {
			t.Errorf("%s: the expression is a %s; a panel or rule needs an instant vector or scalar:\n%s", q.where, typ, q.expr)
			return
		}
		out = append(out, q)
	}
	for _, d := range dashboards {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			where := fmt.Sprintf("%s variable $%s", d.file, v.Name)
			text := v.queryText()
			switch {
			case labelValuesCall.MatchString(text):
				add(&query{where: where, raw: text, labelValues: &labelValues{}})
			case strings.HasPrefix(text, "query_result("):
				add(&query{where: where, raw: strings.TrimSuffix(strings.TrimPrefix(text, "query_result("), ")")})
			default:
				t.Errorf("%s: query %q is neither label_values(metric, label) nor query_result(…)", where, text)
			}
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				add(&query{where: fmt.Sprintf("%s panel %d %q target %s", d.file, p.ID, p.Title, tg.RefID), raw: tg.Expr})
			}
		}
	}
	if rules != nil {
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				add(&query{where: fmt.Sprintf("%s group %s rule %s", rulesFile, g.Name, name), raw: r.Expr, alert: r.Alert})
			}
		}
	}
	return out
}

// selectors returns the vector selectors of e (those inside range
// selectors included).
func selectors(e parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// metricName is the metric a selector names: its name, or an equality
// matcher on __name__; "" when it names none.
func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// TestQueriesParse checks that every panel target, template variable and
// rule expression parses as PromQL once Grafana's variables are
// substituted, yields an instant vector or a scalar, and names its metrics.
func TestQueriesParse(t *testing.T) {
	qs := collectQueries(t, loadDashboards(t), loadRules(t), vars)
	if len(qs) < 40 {
		t.Errorf("found only %d queries: is the extraction missing some?", len(qs))
	}
	for _, q := range qs {
		for _, vs := range selectors(q.parsed) {
			if metricName(vs) == "" {
				t.Errorf("%s: selector %s names no metric", q.where, vs)
			} else if !strings.HasPrefix(metricName(vs), "llmguard_") {
				t.Errorf("%s: %s is not one of llmguard's metrics (llmguard_*)", q.where, metricName(vs))
			}
		}
	}
	t.Logf("%d queries parse", len(qs))
}

// TestSubstitute pins the Grafana variable syntaxes.
func TestSubstitute(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`x{tenant=~"$tenant"}[$__rate_interval]`, `x{tenant=~".*"}[1m]`},
		{`x{tenant=~"${tenant}"}[${__range}]`, `x{tenant=~".*"}[1h]`},
		{`x{tenant=~"${tenant:regex}"}`, `x{tenant=~".*"}`},
		{`x{tenant=~"[[tenant]]"}`, `x{tenant=~".*"}`},
	} {
		got, err := substitute(c.in, vars)
		if err != nil || got != c.want {
			t.Errorf("substitute(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := substitute(`x{user="$user"}`, vars); err == nil {
		t.Error("an unknown variable was substituted")
	}
}
