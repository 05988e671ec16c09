package app

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/fakeclock"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
)

// rateSpan starts a quota's burn rate at the latest of its period's start,
// the reload that added it and its subject's first ledger record, but no
// later than an hour before the report unless the period is younger
// (trial26).
func TestRateSpan(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(14*24*time.Hour + 12*time.Hour)
	var zero time.Time
	for _, tc := range []struct {
		name         string
		added, first time.Time
		now          time.Time
		wantFrom     time.Time
		wantBasis    string
	}{
		{"in force from the start, no record known", zero, zero, now, start, RatePeriod},
		{"added in the previous period", start.Add(-time.Hour), zero, now, start, RatePeriod},
		{"added by a reload two hours ago", now.Add(-2 * time.Hour), zero, now, now.Add(-2 * time.Hour), RateLimitAdded},
		{"first record after the reload", now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now, now.Add(-2 * time.Hour), RateFirstRecord},
		{"first record before the reload", now.Add(-2 * time.Hour), now.Add(-3 * time.Hour), now, now.Add(-2 * time.Hour), RateLimitAdded},
		{"added a minute ago: the last hour", now.Add(-time.Minute), zero, now, now.Add(-time.Hour), RateMinSpan},
		{"a young period: its start", start.Add(10 * time.Minute), zero, start.Add(20 * time.Minute), start, RatePeriod},
	} {
		from, basis := rateSpan(start, tc.added, tc.first, tc.now)
		if !from.Equal(tc.wantFrom) || basis != tc.wantBasis {
			t.Errorf("%s: %v %s, want %v %s", tc.name, from, basis, tc.wantFrom, tc.wantBasis)
		}
	}
}

// limitsAdded stamps the quotas a reload adds (or re-shards) with the
// reload's instant, keeps the stamps of those it keeps, and none of the
// limits in force since the start.
func TestLimitsAddedByReload(t *testing.T) {
	compileTail := func(tail string) *policy.Policy {
		t.Helper()
		cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", tail)))
		if err != nil {
			t.Fatal(err)
		}
		pol, _, err := compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	t1 := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	old := compileTail("limits:\n  - {name: kept, scope: tenant, unit: tokens, quota: 1000, period: month}\n")
	next := compileTail("limits:\n  - {name: kept, scope: tenant, unit: tokens, quota: 2000, period: month}\n  - {name: new, scope: tenant, unit: tokens, quota: 100, period: month}\n")
	m := limitsAdded(nil, old, next, t1)
	if _, ok := (*m)["kept"]; ok || !(*m)["new"].Equal(t1) || len(*m) != 1 {
		t.Errorf("first reload: %v, want new alone at %v", *m, t1)
	}
	m = limitsAdded(m, next, next, t1.Add(time.Hour))
	if !(*m)["new"].Equal(t1) || len(*m) != 1 {
		t.Errorf("a reload keeping both: %v, want new still at %v", *m, t1)
	}
}

// first reads the subject's first record of the period from the report's
// summary, and nothing when the summary starts after the period or its
// first record is before the period's start.
func TestLedgerFirstRecord(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var sum ledger.Summary
	sum.Add(ledger.Record{TS: start.Add(5 * time.Hour), Tenant: "acme", User: "al"})
	sum.Add(ledger.Record{TS: start.Add(9 * time.Hour), Tenant: "acme", User: "bo"})
	sum.Add(ledger.Record{TS: start.Add(7 * time.Hour), Tenant: "acme", User: "al"})
	l := ledgerNames{sum: &sum, from: start}
	pr := policy.Principal{Tenant: "acme", User: "bo"}
	for _, tc := range []struct {
		scope  policy.Scope
		tenant string
		period time.Time
		from   time.Time
		want   time.Time
	}{
		{policy.ScopeTenant, "", start, start, start.Add(5 * time.Hour)},
		{policy.ScopeUser, "", start, start, start.Add(9 * time.Hour)},
		{policy.ScopeGlobal, "", start, start, start.Add(5 * time.Hour)},
		{policy.ScopeGlobal, "acme", start, start, time.Time{}},
		{policy.ScopeKey, "", start, start, time.Time{}},
		{policy.ScopeTenant, "", start, start.Add(time.Hour), time.Time{}},                // the summary starts later
		{policy.ScopeTenant, "", start.Add(6 * time.Hour), start, time.Time{}},            // a record before the period
		{policy.ScopeUser, "", start.Add(6 * time.Hour), start, start.Add(9 * time.Hour)}, // bo's first is in it
	} {
		l.from = tc.from
		r := &policy.Rule{Name: "q", Scope: tc.scope}
		if got := l.first(r, pr, tc.tenant, tc.period); !got.Equal(tc.want) {
			t.Errorf("scope %v, report tenant %q, period from %v, summary from %v: %v, want %v", tc.scope, tc.tenant, tc.period, tc.from, got, tc.want)
		}
	}
}

// A tenant budget added by a reload in the middle of the month, most of
// it spent at once: usage measures its rate from the reload, not over the
// month, and says so (trial26: 84% spent in a minute read 1.3 days left).
// The clock is injected: the reload at 12:00 on the 15th, the report two
// hours later.
func TestUsageRateFromReloadThatAddedTheBudget(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	write := func(tail string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(baseConfig(t, mock.URL, tail)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Date(2026, 12, 15, 11, 0, 0, 0, time.UTC))
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clk.Now)
	clk.Advance(time.Hour)
	reloadAt := clk.Now()
	write("limits:\n  - {name: acme-month, scope: tenant, unit: tokens, quota: 100, period: month}\n")
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if resp, body := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		"x-mock-completion-tokens", "5"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	clk.Advance(2*time.Hour - time.Minute)
	rep, err := h.app.UsageIn(context.Background(), UsageQuery{Tenant: "acme"})
	if err != nil || len(rep.Quotas) != 1 {
		t.Fatalf("%v: %+v", err, rep)
	}
	q := rep.Quotas[0]
	if q.RateBasis != RateLimitAdded || !q.RateFrom.Equal(reloadAt) {
		t.Errorf("rate from %v (%s), want %v (limit_added)", q.RateFrom, q.RateBasis, reloadAt)
	}
	// Used over the two hours since the reload: Remaining lasts
	// Remaining/Used × 2 h, well inside the month's 16.5 days left.
	if q.Used <= 0 || q.Remaining <= 0 {
		t.Fatalf("quota %+v: want some used and some left", q)
	}
	want := float64(q.Remaining) / float64(q.Used) * 2.0 / 24
	if math.Abs(q.DaysLeft-want) > 1e-9 || q.LastsPeriod {
		t.Errorf("days left %v (lasts the period: %v), want %v: the rate over the two hours since the reload", q.DaysLeft, q.LastsPeriod, want)
	}
}
