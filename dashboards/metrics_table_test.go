package dashboards

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricNames are the ways llmguard's sources name a metric: a Prometheus
// Opts literal, a collector's prometheus.NewDesc (meter's budget gauges,
// reserve's learned reservations, the keys), a name→help table, or a
// helper that prepends llmguard_ (meter's counter, internal/app's lease
// counters).
var metricNames = []*regexp.Regexp{
	regexp.MustCompile(`Name:\s*"llmguard_([a-z0-9_]+)"`),
	regexp.MustCompile(`NewDesc\(\s*"llmguard_([a-z0-9_]+)"`),
	regexp.MustCompile(`"llmguard_([a-z0-9_]+)":\s*"`),
	regexp.MustCompile(`\b(?:counter|gauge|histogram)\("(?:llmguard_)?([a-z0-9_]+)"`),
}

// sourceMetrics returns every metric name (without llmguard_) that the
// repository's non-test Go files define.
func sourceMetrics(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, re := range metricNames {
			for _, m := range re.FindAllSubmatch(b, -1) {
				names = append(names, string(m[1]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// dashboards/README.md calls its Metrics table "the full table": every
// metric llmguard defines has a row in it (a new user looking up
// llmguard_waiting or llmguard_panics_total found none).
func TestMetricsTableListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	names := sourceMetrics(t)
	// The scan must find the metrics it is known to: a pattern that stops
	// matching would otherwise pass the test vacuously.
	for _, known := range []string{"requests_total", "lease_taken_total", "waiting", "ledger_dropped_total", "breaker_state", "quota_used", "keys"} {
		if !slices.Contains(names, known) {
			t.Fatalf("the source scan found no %s: fix metricNames (found %v)", known, names)
		}
	}
	for _, n := range names {
		if !strings.Contains(doc, "\n| `"+n+"`") {
			t.Errorf("dashboards/README.md's Metrics table has no row for llmguard_%s", n)
		}
	}
}

// The top README's "Metrics and dashboards" section, which a new user reads
// first, names every metric llmguard defines too (it named neither
// response_body_bytes_in_flight nor the lease counters): each as
// `name` or `name{labels}`, without the llmguard_ prefix.
func TestREADMEMetricsSectionNamesEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Metrics and dashboards\n")
	if start < 0 {
		t.Fatal("README.md has no Metrics and dashboards section")
	}
	end := strings.Index(doc[start+1:], "\n## ")
	if end < 0 {
		t.Fatal("the Metrics and dashboards section has no end")
	}
	section := doc[start : start+1+end]
	names := sourceMetrics(t)
	if len(names) < 40 {
		t.Fatalf("the source scan found %d metrics: fix metricNames", len(names))
	}
	for _, n := range names {
		if !strings.Contains(section, "`"+n+"`") && !strings.Contains(section, "`"+n+"{") {
			t.Errorf("README.md's Metrics and dashboards section does not name %s", n)
		}
	}
}

// tableLabels maps each metric of dashboards/README.md's Metrics table to
// its labels, sorted and joined with "," ("" for none).
func tableLabels(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)`[^|]*\\| [a-z]+ \\|([^|]*)\\|")
	label := regexp.MustCompile("`([a-z_]+)`")
	m := map[string]string{}
	for _, r := range row.FindAllStringSubmatch(string(b), -1) {
		var ls []string
		for _, l := range label.FindAllStringSubmatch(r[2], -1) {
			ls = append(ls, l[1])
		}
		slices.Sort(ls)
		m[r[1]] = strings.Join(ls, ",")
	}
	return m
}

// The top README's Metrics section gives each metric with labels its
// labels, the table's (it showed reserved_units_total and
// refunded_units_total bare, where both carry limit): every `name{…}` in
// it has the table's labels, and every metric with labels appears at least
// once as `name{…}`.
func TestREADMEMetricsSectionLabels(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Metrics and dashboards\n")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("README.md has no Metrics and dashboards section")
	}
	section := doc[start : start+1+end]
	table := tableLabels(t)
	if len(table) < 40 || table["requests_total"] != "flavor,limit,model,outcome" || table["open_connections"] != "" {
		t.Fatalf("the table parse found %d metrics, requests_total %q: fix tableLabels", len(table), table["requests_total"])
	}
	written := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)\\{([a-z_,]*)\\}`").FindAllStringSubmatch(section, -1) {
		want, ok := table[m[1]]
		if !ok {
			continue
		}
		ls := strings.Split(m[2], ",")
		slices.Sort(ls)
		if got := strings.Join(ls, ","); got != want {
			t.Errorf("README.md's Metrics section writes %s{%s}; the table's labels are {%s}", m[1], m[2], want)
		}
		written[m[1]] = true
	}
	for n, ls := range table {
		if ls != "" && !written[n] && strings.Contains(section, "`"+n+"`") {
			t.Errorf("README.md's Metrics section names %s without its labels {%s}", n, ls)
		}
	}
}

// The top README's Prometheus recipe says how many rules promtool will
// report for alerts.yml; trial24 read "14 rules" where promtool said 15. The
// figure must be the number of alerting rules alerts.yml holds.
func TestREADMERuleCountMatchesAlerts(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`# the config and the (\d+) rules`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`README.md's Prometheus recipe no longer says "the config and the N rules": update this test`)
	}
	n := 0
	for _, g := range loadRules(t).Groups {
		n += len(g.Rules)
	}
	if n < 10 {
		t.Fatalf("alerts.yml parsed to %d rules: the loader is wrong", n)
	}
	if got := string(m[1]); got != strconv.Itoa(n) {
		t.Errorf("README.md says promtool finds %s rules in alerts.yml; it holds %d", got, n)
	}
}
