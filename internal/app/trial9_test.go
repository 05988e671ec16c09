package app

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// A request two budgets deny is refused with the budget that waits
// longest named and its wait in Retry-After; the message gives the named
// budget's own reset, instant and wait alike (trial9: a user's daily
// budget read "It resets at 2026-12-06T00:00:00Z (in 623h9m2.5s)", the
// wait of the tenant's monthly budget, 9 minutes before that midnight;
// then the first denier was named, its own reset given and the longer
// wait said apart). A request only the daily budget denies names it.
func TestQuotaDenialNamesItsOwnReset(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	now := time.Date(2026, 12, 5, 23, 50, 0, 0, time.UTC)
	clock := &fakeClock{now: now}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	day, month := 10*time.Minute, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Sub(now)
	for _, c := range []struct {
		monthly int
		wait    time.Duration // Retry-After
		name    string        // the budget named
		reset   string        // its reset, as the message gives it
		zone    string        // the daily budget's timezone
	}{
		{2, month, "acme-monthly", "2027-01-01T00:00:00Z", "UTC"}, // both spent: the month waits longest
		{10, day, "user-daily", "2026-12-06T00:00:00Z", "UTC"},    // the daily budget alone
		// A budget in its own zone resets at its midnight, said with its
		// offset (trial11: a Europe/Paris budget read "23:00:00Z").
		{10, 23*time.Hour + 10*time.Minute, "user-daily", "2026-12-07T00:00:00+01:00 (Europe/Paris)", "Europe/Paris"},
	} {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: openai, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: %s, user: alice, tenant: acme}]
limits:
  - {name: user-daily, scope: user, unit: requests, quota: 2, period: day, timezone: %s}
  - {name: acme-monthly, scope: tenant, unit: requests, quota: %d, period: month}
`, mock.URL, testKey, c.zone, c.monthly)))
		if err != nil {
			t.Fatal(err)
		}
		h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now)
		for i := range 2 {
			if resp, body := h.do("/v1/chat/completions", chat); resp.StatusCode != 200 {
				t.Fatalf("monthly %d, call %d: %d %s", c.monthly, i, resp.StatusCode, body)
			}
		}
		resp, body := h.do("/v1/chat/completions", chat)
		_, msg := errorCode(t, "/v1/chat/completions", body)
		if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-limit") != c.name || !strings.Contains(msg, "Budget "+c.name+" ") {
			t.Fatalf("monthly %d: %d %s (x-llmguard-limit %q), want 429 by %s", c.monthly, resp.StatusCode, body, resp.Header.Get("x-llmguard-limit"), c.name)
		}
		if ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); ra != int64(c.wait/time.Second) {
			t.Errorf("monthly %d: Retry-After %d, want %d", c.monthly, ra, int64(c.wait/time.Second))
		}
		own := "It resets at " + c.reset + " (in " + c.wait.String() + ")."
		if !strings.Contains(msg, own) || strings.Contains(msg, "at the earliest") {
			t.Errorf("monthly %d: message %q, want %q and no other wait", c.monthly, msg, own)
		}
	}
}
