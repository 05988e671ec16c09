package app

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// The bug report, end to end: a daily USD quota of $0.001, three Anthropic
// calls reserving 20 output tokens and using 15. The budget gauges read
// what the calls cost (not the last admission's level with its
// reservation), and at 00:00:08 the next day, with no request since, 0
// used of the new period, which ends a day later.
func TestBudgetGaugesFollowSpendAndReset(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	clock := &fakeClock{now: time.Date(2027, 2, 10, 7, 0, 0, 0, time.UTC)}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys: [{key: %[2]s, user: alice, tenant: acme}]
models:
  claude-sonnet-4-5: {input_usd_per_mtok: 3, cached_input_usd_per_mtok: 0.3, cache_write_usd_per_mtok: 3.75, output_usd_per_mtok: 15}
limits:
  - {name: acme-daily-usd, scope: tenant, unit: usd, quota: 0.001, period: day}
`, mock.URL, testKey)))
	if err != nil {
		t.Fatal(err)
	}
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now)
	sonnet := policy.USDPerMTok{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}.Price()
	msg := `{"model":"claude-sonnet-4-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`
	var spent int64
	for i := range 3 {
		resp, body := h.do("/v1/messages", msg, "x-mock-completion-tokens", "15")
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		spent += sonnet.MicroUSD(spec.Usage{InputTokens: intField(t, body, "input_tokens"), OutputTokens: intField(t, body, "output_tokens")})
	}
	quota := map[string]string{"limit": "acme-daily-usd", "tenant": "acme"}
	gauges := func(when string, used, util float64, end time.Time) {
		t.Helper()
		m := h.scrape()
		for _, c := range []struct {
			family string
			want   float64
		}{
			{"llmguard_quota_used", used},
			{"llmguard_limit_utilization", util},
			{"llmguard_quota_limit", 0.001},
			{"llmguard_quota_period_end_timestamp_seconds", float64(end.Unix())},
		} {
			f := m[c.family]
			if f == nil {
				t.Errorf("%s: no %s", when, c.family)
				continue
			}
			if got := f.sum(quota); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("%s: %s = %v, want %v", when, c.family, got, c.want)
			}
		}
	}
	midnight := time.Date(2027, 2, 11, 0, 0, 0, 0, time.UTC)
	gauges(fmt.Sprintf("after 3 calls costing %d µUSD", spent), float64(spent)/1e6, float64(spent)/1000, midnight)
	clock.Set(midnight.Add(8 * time.Second))
	gauges("8 s into the next day, no request since", 0, 0, midnight.Add(24*time.Hour))
}
