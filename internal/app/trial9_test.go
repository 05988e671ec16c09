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

// A request two budgets deny is refused with the first denier named and
// the longest wait in Retry-After; the message gives the named budget's
// own reset, instant and wait alike, and the longer wait apart (trial9: a
// user's daily budget read "It resets at 2026-12-06T00:00:00Z (in
// 623h9m2.5s)", the wait of the tenant's monthly budget, 9 minutes before
// that midnight). A request only the daily budget denies keeps one wait.
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
		longer  bool          // the message gives a longer wait apart
	}{
		{2, month, true}, // both spent: the month's wait
		{10, day, false}, // the daily budget alone
	} {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: openai, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: %s, user: alice, tenant: acme}]
limits:
  - {name: user-daily, scope: user, unit: requests, quota: 2, period: day}
  - {name: acme-monthly, scope: tenant, unit: requests, quota: %d, period: month}
`, mock.URL, testKey, c.monthly)))
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
		if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-limit") != "user-daily" {
			t.Fatalf("monthly %d: %d %s (x-llmguard-limit %q), want 429 by user-daily", c.monthly, resp.StatusCode, body, resp.Header.Get("x-llmguard-limit"))
		}
		if ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); ra != int64(c.wait/time.Second) {
			t.Errorf("monthly %d: Retry-After %d, want %d", c.monthly, ra, int64(c.wait/time.Second))
		}
		own := "It resets at 2026-12-06T00:00:00Z (in " + day.String() + ")."
		if !strings.Contains(msg, own) {
			t.Errorf("monthly %d: message %q, want %q", c.monthly, msg, own)
		}
		longer := "it can be admitted in " + month.String() + " at the earliest"
		if got := strings.Contains(msg, longer); got != c.longer {
			t.Errorf("monthly %d: message %q: says %q: %v, want %v", c.monthly, msg, longer, got, c.longer)
		}
	}
}
