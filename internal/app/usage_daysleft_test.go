package app

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"testing"
	"time"
)

// daysLeft walks fixed instants of a daily quota (midnight to midnight
// UTC): the burn rate so far projects how long the remainder lasts, but
// never past the period's end, when the quota resets. The 62,850-day
// projection of a barely used daily quota seven hours before its reset is
// shown as those seven hours.
func TestDaysLeftCappedAtPeriodEnd(t *testing.T) {
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	end := start.Add(24 * time.Hour)
	for _, s := range []struct {
		name            string
		used, remaining int64
		at              time.Duration // after start
		days            float64
		lasts           bool
	}{
		{name: "nothing used yet", used: 0, remaining: 1000, at: 17 * time.Hour, days: -1},
		{name: "at the period's start", used: 5, remaining: 995, at: 0, days: -1},
		{name: "barely used, 7 h left (projected 44 million days)", used: 16, remaining: 1_000_000_000 - 16, at: 17 * time.Hour,
			days: 7.0 / 24, lasts: true},
		{name: "spent fast: runs out before the reset", used: 900, remaining: 100, at: 12 * time.Hour,
			days: 100 / (900 / 0.5)},
		{name: "runs out exactly at the reset", used: 500, remaining: 500, at: 12 * time.Hour, days: 0.5, lasts: true},
		{name: "overspent", used: 1200, remaining: -200, at: 6 * time.Hour, days: 0},
		{name: "past the end (clock ahead of the window)", used: 10, remaining: 990, at: 25 * time.Hour, days: 0, lasts: true},
	} {
		days, lasts := daysLeft(s.used, s.remaining, start, end, start.Add(s.at))
		if math.Abs(days-s.days) > 1e-9 || lasts != s.lasts {
			t.Errorf("%s: days %v lasts %v, want %v %v", s.name, days, lasts, s.days, s.lasts)
		}
	}
}

// Through the admin listener on a frozen clock (noon UTC): a daily
// quota of 1,000,000 tokens after one small request reports half a day
// left, the time to its reset, and says the cap applied.
func TestAdminUsageDaysLeftCapped(t *testing.T) {
	h := startFrozen(t, `limits:
  - {name: acme-daily, scope: tenant, unit: tokens, quota: 1000000, period: day}
`)
	if resp, _ := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`,
		"x-mock-completion-tokens", "5"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, err := http.Get(h.admin + "/admin/usage?tenant=acme&period=day")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rep UsageReport
	if err := json.Unmarshal(body, &rep); err != nil || len(rep.Quotas) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	if q := rep.Quotas[0]; q.Used <= 0 || q.DaysLeft != 0.5 || !q.LastsPeriod {
		t.Errorf("quota %+v, want 0.5 days left (to the reset at midnight), lasts_period", q)
	}
}
