package app

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// fakeClock is a settable clock for the memory store and quota periods.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// rateLimitItem reads r and t of one item of the RateLimit field.
func rateLimitItem(t *testing.T, h http.Header, name string) (r, secs int64) {
	t.Helper()
	m := regexp.MustCompile(`"` + regexp.QuoteMeta(name) + `";r=(-?\d+);t=(\d+)`).FindStringSubmatch(h.Get("RateLimit"))
	if m == nil {
		t.Fatalf("no %s item in RateLimit %q", name, h.Get("RateLimit"))
	}
	r, _ = strconv.ParseInt(m[1], 10, 64)
	secs, _ = strconv.ParseInt(m[2], 10, 64)
	return r, secs
}

// A monthly USD budget in New York time, spent down by requests of two
// models at their prices (to the micro-dollar), denies the request that
// would cross it with insufficient_quota until 00:00 on the 1st — in a
// 28-day February, across the March daylight-saving change, and in a leap
// February.
func TestMonthlyUSDBudgetWithFakeClock(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2027, 2, 10, 12, 0, 0, 0, ny)}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys: [{key: %[2]s, user: alice, tenant: acme}]
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, cached_input_usd_per_mtok: 0.075, output_usd_per_mtok: 0.60}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, cached_input_usd_per_mtok: 0.3, cache_write_usd_per_mtok: 3.75, output_usd_per_mtok: 15}
limits:
  - {name: acme-monthly, scope: tenant, unit: usd, quota: 0.002, period: month, timezone: America/New_York, warn_at: [0.8, 0.95]}
`, mock.URL, testKey)))
	if err != nil {
		t.Fatal(err)
	}
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now)
	mini := policy.USDPerMTok{Input: 0.15, CachedInput: 0.075, Output: 0.60}.Price()
	sonnet := policy.USDPerMTok{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}.Price()
	const budget = 2000 // µUSD

	left := func() (int64, int64) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return rateLimitItem(t, resp.Header, "acme-monthly")
	}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`
	msg := `{"model":"claude-sonnet-4-5","max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`

	// Spend down with both models; every answer's usage is priced exactly.
	var spent int64
	for i, call := range []struct {
		path, body, out string
		price           policy.Price
	}{
		{"/v1/chat/completions", chat, "60", mini},
		{"/v1/messages", msg, "30", sonnet},
		{"/v1/chat/completions", chat, "90", mini},
		{"/v1/messages", msg, "25", sonnet},
		{"/v1/messages", msg, "33", sonnet},
	} {
		resp, body := h.do(call.path, call.body, "x-mock-completion-tokens", call.out)
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		var u spec.Usage
		if strings.HasPrefix(call.path, "/v1/messages") {
			u = spec.Usage{InputTokens: intField(t, body, "input_tokens") + intField(t, body, "cache_read_input_tokens") + intField(t, body, "cache_creation_input_tokens"),
				OutputTokens: intField(t, body, "output_tokens")}
		} else {
			u = spec.Usage{InputTokens: intField(t, body, "prompt_tokens"), OutputTokens: intField(t, body, "completion_tokens")}
		}
		spent += call.price.MicroUSD(u)
		if r, _ := left(); r != budget-spent {
			t.Fatalf("after call %d: %d µUSD left, want %d (spent %d to the micro-dollar)", i, r, budget-spent, spent)
		}
	}
	t.Logf("spent %d of %d µUSD", spent, budget)

	// The next Claude call reserves more than is left: denied, whatever it
	// would really have used, until March 1st 00:00 in New York.
	resp, body := h.do("/v1/messages", msg)
	if resp.StatusCode != 429 || !strings.Contains(body, "acme-monthly") || resp.Header.Get("x-should-retry") != "false" {
		t.Fatalf("over budget: %d %s (x-should-retry %q)", resp.StatusCode, body, resp.Header.Get("x-should-retry"))
	}
	march := time.Date(2027, 3, 1, 0, 0, 0, 0, ny)
	if ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); ra != int64(march.Sub(clock.Now()).Seconds()) {
		t.Errorf("Retry-After %d, want %v (to March 1st 00:00 New York)", ra, march.Sub(clock.Now()).Seconds())
	}
	// OpenAI callers get insufficient_quota.
	resp, body = h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`)
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"insufficient_quota"`) {
		t.Errorf("OpenAI caller over budget: %d %s", resp.StatusCode, body)
	}
	if w := resp.Header.Get("x-llmguard-limit"); w != "acme-monthly" {
		t.Errorf("x-llmguard-limit %q", w)
	}

	// A minute before midnight on the 28th (a 28-day February) it is still spent.
	clock.Set(march.Add(-time.Minute))
	if r, secs := left(); r != budget-spent || secs != 60 {
		t.Errorf("Feb 28 23:59: %d left, %ds to the end; want %d and 60", r, secs, budget-spent)
	}
	// At 00:00 on March 1st the budget is whole again.
	clock.Set(march)
	if r, _ := left(); r != budget {
		t.Errorf("March 1st 00:00: %d left, want the whole %d", r, budget)
	}
	// March has 31 days but, in New York, one hour less (DST on the 14th):
	// the period ends at April 1st 00:00 EDT.
	april := time.Date(2027, 4, 1, 0, 0, 0, 0, ny)
	clock.Set(time.Date(2027, 3, 20, 9, 0, 0, 0, ny))
	resp, _ = h.do("/v1/chat/completions", chat, "x-mock-completion-tokens", "10")
	if !strings.Contains(resp.Header.Get("RateLimit-Policy"), fmt.Sprintf(`"acme-monthly";q=%d;w=%d`, budget, 31*86400-3600)) {
		t.Errorf("March period: RateLimit-Policy %q, want w = 31 days − 1 h", resp.Header.Get("RateLimit-Policy"))
	}
	if _, secs := rateLimitItem(t, resp.Header, "acme-monthly"); secs != int64(april.Sub(clock.Now()).Seconds()) {
		t.Errorf("t = %d, want %v (to April 1st 00:00 EDT)", secs, april.Sub(clock.Now()).Seconds())
	}
	// A leap February lasts 29 days.
	clock.Set(time.Date(2028, 2, 29, 12, 0, 0, 0, ny))
	resp, _ = h.do("/v1/chat/completions", chat, "x-mock-completion-tokens", "10")
	if !strings.Contains(resp.Header.Get("RateLimit-Policy"), fmt.Sprintf(`"acme-monthly";q=%d;w=%d`, budget, 29*86400)) {
		t.Errorf("leap February: RateLimit-Policy %q, want w = 29 days", resp.Header.Get("RateLimit-Policy"))
	}
}

// Crossing warn_at thresholds adds x-llmguard-budget-warning to the
// answers that follow: the crossing is counted when a request's settled
// cost takes the quota past a threshold, never on a reservation.
func TestBudgetWarningHeader(t *testing.T) {
	h := start(t, `
limits:
  - {name: alice-daily, scope: user, unit: tokens, quota: 1000, period: day, warn_at: [0.5, 0.9]}
`)
	const counted = `llmguard_budget_warnings_total{limit="alice-daily",tenant="acme"} 1`
	// 8 + 900 reserved is 91%, but the call spends 8 + 5: no warning.
	resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":900}`, "x-mock-completion-tokens", "5")
	if w := resp.Header.Get("x-llmguard-budget-warning"); w != "" || strings.Contains(h.metrics(), counted) {
		t.Errorf("a 91%% reservation spending 1%% warned: %q", w)
	}
	resp, _ = h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":300}`, "x-mock-completion-tokens", "300")
	if w := resp.Header.Get("x-llmguard-budget-warning"); w != "" {
		t.Errorf("at 1%% before the call: warning %q", w)
	}
	resp, _ = h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":300}`, "x-mock-completion-tokens", "300")
	if w := resp.Header.Get("x-llmguard-budget-warning"); w != "" {
		t.Errorf("at 32%% before the call: warning %q", w)
	}
	if m := h.metrics(); !strings.Contains(m, counted) {
		t.Errorf("spend crossing 50%% (63%%) not counted once")
	}
	resp, _ = h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`)
	if w := resp.Header.Get("x-llmguard-budget-warning"); w != "alice-daily; used=0.63" {
		t.Errorf("at 63%%: warning %q, want %q", w, "alice-daily; used=0.63")
	}
	if m := h.metrics(); !strings.Contains(m, counted) {
		t.Errorf("the same threshold was counted again in the same period")
	}
}
