package meter

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// A request under a thousand quotas past their warn_at thresholds gets at
// most maxBudgetWarnings x-llmguard-budget-warning values: the most used.
func TestBudgetWarningsBounded(t *testing.T) {
	m := &Meter{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	x := &Exchange{m: m}
	for i := range 1000 {
		used := int64(800 + i%150) // 80% to 94.9% used
		switch i {
		case 321:
			used = 990
		case 654:
			used = 980
		}
		x.rules = append(x.rules, Applied{
			Rule:  &policy.Rule{Name: fmt.Sprintf("q%d", i), Unit: policy.UnitUSD, Period: policy.PeriodMonth, WarnAt: []float64{0.8}},
			Key:   fmt.Sprintf("k%d", i),
			Limit: bucket.Quota(1000, start, start.AddDate(0, 1, 0)), Status: bucket.Status{Remaining: 1000 - used},
		})
	}
	m.budgetWarnings(x)
	if len(x.warnings) != maxBudgetWarnings {
		t.Fatalf("%d warnings, want %d", len(x.warnings), maxBudgetWarnings)
	}
	for _, want := range []string{"q321; used=0.99", "q654; used=0.98"} {
		if !slices.Contains(x.warnings, want) {
			t.Errorf("warnings %v lack the most used %q", x.warnings, want)
		}
	}
}

// A quota's warn_at crossing is logged once per threshold and period, and
// again when the quota's amount changes (raised live after it warned): it
// is a new budget to warn about.
func TestBudgetCrossingsOncePerAmount(t *testing.T) {
	var log strings.Builder
	m := &Meter{log: slog.New(slog.NewTextHandler(&log, nil))}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	settle := func(amount, usedBefore, cost int64) {
		x := &Exchange{m: m, rules: []Applied{{
			Rule:  &policy.Rule{Name: "q", Unit: policy.UnitUSD, Period: policy.PeriodMonth, WarnAt: []float64{0.8}},
			Key:   "k",
			Limit: bucket.Quota(amount, start, start.AddDate(0, 1, 0)), Status: bucket.Status{Remaining: amount - usedBefore},
		}}}
		m.budgetCrossings(x, []int64{cost})
	}
	settle(1000, 700, 150)  // 85 %: warns
	settle(1000, 850, 10)   // past it already: nothing
	settle(2000, 1500, 200) // raised to 2000, 85 %: warns again
	settle(2000, 1700, 10)
	if n := strings.Count(log.String(), "budget threshold crossed"); n != 2 {
		t.Errorf("%d crossings logged, want 2 (once per amount):\n%s", n, log.String())
	}
	settle(3000, 2000, 510) // 2510/3000: logged to 4 places
	if !strings.Contains(log.String(), "used=0.8367 ") {
		t.Errorf("the used fraction is not logged to 4 places:\n%s", log.String())
	}
}
