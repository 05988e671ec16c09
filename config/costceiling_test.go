package config

import (
	"strings"
	"testing"
)

// TestReportedCostCeiling: reported_cost_ceiling_usd defaults to $100,
// keeps a value in [0, 1e12], and refuses a negative, NaN, infinite or
// larger one naming the field (adv51).
func TestReportedCostCeiling(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  float64 // 0: refused
	}{
		{"", 100}, {"0", 100}, {"2.5", 2.5}, {"1e12", 1e12},
		{"-1", 0}, {".nan", 0}, {".inf", 0}, {"-.inf", 0}, {"1e13", 0},
	} {
		doc := minimalUpstream
		if tc.value != "" {
			doc += "reported_cost_ceiling_usd: " + tc.value + "\n"
		}
		c, err := Parse([]byte(doc))
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("%q accepted as %v", tc.value, c.ReportedCostCeilingUSD)
		case tc.want == 0 && !strings.Contains(err.Error(), "reported_cost_ceiling_usd"):
			t.Errorf("%q: the error names no field: %v", tc.value, err)
		case tc.want != 0 && err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case tc.want != 0 && c.ReportedCostCeilingUSD != tc.want:
			t.Errorf("%q read as %v, want %v", tc.value, c.ReportedCostCeilingUSD, tc.want)
		}
	}
}
