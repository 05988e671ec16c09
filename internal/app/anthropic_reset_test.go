package app

import (
	"strings"
	"testing"
	"time"
)

// An Anthropic caller's anthropic-ratelimit-requests-reset under a daily
// quota is the quota's period end exactly, the instant its 429 message
// names (a trial saw 00:00:01Z in the header and 00:00:00Z in the message:
// the header added the reset to the proxy's clock and rounded up a whole
// second). The period end is the next UTC midnight of the clock read before
// or after the calls (either, should the test cross midnight).
func TestAnthropicQuotaResetIsThePeriodEnd(t *testing.T) {
	nextMidnight := func() string {
		return time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
	}
	before := nextMidnight()
	h := startFlavors(t, `  - {name: claude-daily, scope: user, unit: requests, quota: 1, period: day}`)
	body := `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	ok, _ := h.do("/v1/messages", body)
	denied, msg := h.do("/v1/messages", body)
	after := nextMidnight()
	if ok.StatusCode != 200 || denied.StatusCode != 429 {
		t.Fatalf("statuses %d, %d; want 200 then 429 (quota 1)", ok.StatusCode, denied.StatusCode)
	}
	for i, resp := range []string{ok.Header.Get("anthropic-ratelimit-requests-reset"), denied.Header.Get("anthropic-ratelimit-requests-reset")} {
		if resp != before && resp != after {
			t.Errorf("call %d: anthropic-ratelimit-requests-reset %q, want the period end %s", i+1, resp, after)
		}
		if !strings.Contains(msg, resp) {
			t.Errorf("call %d: the 429's message %s does not name the header's reset %q", i+1, msg, resp)
		}
	}
}
