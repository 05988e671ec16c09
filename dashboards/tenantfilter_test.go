package dashboards

import (
	"maps"
	"regexp"
	"testing"
)

// histogramSeries is the suffix Prometheus adds to a histogram's series.
var histogramSeries = regexp.MustCompile(`_(bucket|sum|count)$`)

// A dashboard with a $tenant variable shows the tenants picked: every panel
// selector of a metric that carries a tenant label matches tenant on the
// variable. Before, tenants-budgets.json's "Budget warnings crossed"
// summed every tenant's warnings by limit whichever tenant was picked, and
// its description said the metric had no tenant label (trial8).
func TestTenantVariableFiltersEveryPanel(t *testing.T) {
	withTenant := map[string]bool{}
	for _, f := range declaredByProxy(t) {
		if f.labels["tenant"] {
			withTenant[f.name] = true
		}
	}
	if !withTenant["llmguard_spend_usd_total"] || !withTenant["llmguard_budget_warnings_total"] {
		t.Fatalf("the declared families with a tenant label miss spend_usd_total or budget_warnings_total: %v", withTenant)
	}
	const picked = "picked-tenant" // what $tenant stands for here
	vals := maps.Clone(vars)
	vals["tenant"] = picked
	checked := 0
	for _, d := range loadDashboards(t) {
		hasVar := false
		for _, v := range d.Templating.List {
			hasVar = hasVar || v.Name == "tenant"
		}
		if !hasVar {
			continue
		}
		for _, q := range collectQueries(t, []*dashboard{d}, nil, vals) {
			if q.labelValues != nil {
				continue // the variable's own query
			}
			for _, vs := range selectors(q.parsed) {
				if !withTenant[histogramSeries.ReplaceAllString(metricName(vs), "")] {
					continue
				}
				checked++
				filtered := false
				for _, m := range vs.LabelMatchers {
					filtered = filtered || (m.Name == "tenant" && m.Value == picked)
				}
				if !filtered {
					t.Errorf("%s: %s carries a tenant label but ignores $tenant", q.where, vs)
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d selectors of metrics with a tenant label checked: is the extraction missing some?", checked)
	}
}
