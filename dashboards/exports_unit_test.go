package dashboards

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestCheckExported walks the rules for metric names: exported names pass
// with their labels; the quota gauges pass unexported only while no quota
// metric is exported at all, and fail once one is exported under another
// name; any other missing name or label fails.
func TestCheckExported(t *testing.T) {
	gauge := func(name string, labels ...string) *family {
		f := &family{name: name, typ: dto.MetricType_GAUGE, labels: map[string]bool{}, source: "scraped"}
		for _, l := range labels {
			f.labels[l] = true
		}
		return f
	}
	parse := func(expr string) *query {
		t.Helper()
		e, err := promqlParser.ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		return &query{where: "q", expr: expr, parsed: e}
	}
	base := func(extra ...*family) exports {
		e := exports{}
		e.add(gauge("llmguard_limit_utilization", "limit", "tenant"))
		for _, f := range extra {
			e.add(f)
		}
		return e
	}
	for _, c := range []struct {
		name        string
		exports     exports
		expr        string
		wantPending int
		wantErr     string // substring; "" for none
	}{
		{name: "exported, known labels", exports: base(),
			expr: `max by (limit, tenant) (llmguard_limit_utilization{tenant=~".*"})`},
		{name: "unknown label matched", exports: base(),
			expr: `llmguard_limit_utilization{user="x"}`, wantErr: `has no label "user"`},
		{name: "unknown label grouped by", exports: base(),
			expr: `sum by (model) (llmguard_limit_utilization)`, wantErr: `none of [llmguard_limit_utilization] has label "model"`},
		{name: "not exported", exports: base(),
			expr: `llmguard_nope`, wantErr: "does not export llmguard_nope"},
		{name: "quota pending", exports: base(),
			expr: `llmguard_quota_used{tenant="a"} / llmguard_quota_limit`, wantPending: 2},
		{name: "quota pending, wrong label", exports: base(),
			expr: `llmguard_quota_used{user="a"}`, wantPending: 1, wantErr: `has no label "user"`},
		{name: "quota exported under another name", exports: base(gauge("llmguard_quota_used_usd", "limit", "tenant")),
			expr: `llmguard_quota_used`, wantErr: "renamed?"},
		{name: "quota exported", exports: base(gauge("llmguard_quota_used", "limit", "tenant")),
			expr: `max by (tenant) (llmguard_quota_used)`},
	} {
		pending, errs := checkExported(parse(c.expr), c.exports)
		if len(pending) != c.wantPending {
			t.Errorf("%s: pending %v, want %d", c.name, pending, c.wantPending)
		}
		switch {
		case c.wantErr == "" && len(errs) > 0:
			t.Errorf("%s: unexpected %v", c.name, errs)
		case c.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.wantErr)):
			t.Errorf("%s: errors %v, want one containing %q", c.name, errs, c.wantErr)
		}
	}
}
