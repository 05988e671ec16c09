package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// A denial by a bucket in debt (an earlier call settled above what it
// reserved) names the debt beside "remaining 0", so that a wait far longer
// than the request's own cost reads as what it is (trial11: "remaining 0,
// requested 18. Please try again in 31m32.843s" from a 1000-token-an-hour
// bucket 508 tokens in debt, where 18 tokens refill in 65 s); a bucket that
// is not in debt says nothing of it. Token buckets and window counters
// alike, in tokens and in dollars.
func TestDeniedInDebtNamesTheDebt(t *testing.T) {
	hour := time.Hour
	tokenBucket := bucket.Limit{Capacity: 1000, Rate: 1000, Per: hour}
	window := bucket.Limit{Capacity: 1000, Per: hour, Algorithm: bucket.FixedWindow}
	cases := []struct {
		name      string
		unit      policy.Unit
		limit     bucket.Limit
		remaining int64
		want      string // in the message; "" when no debt is to be named
	}{
		{name: "token bucket in debt", unit: policy.UnitTokens, limit: tokenBucket, remaining: -508,
			want: "remaining 0 (508 tokens in debt: earlier calls used more than they reserved), requested 18."},
		{name: "usd bucket in debt", unit: policy.UnitUSD, limit: tokenBucket, remaining: -508,
			want: "remaining $0.000000 ($0.000508 in debt: earlier calls used more than they reserved), requested $0.000018."},
		{name: "window counter in debt", unit: policy.UnitTokens, limit: window, remaining: -7,
			want: "remaining 0 (7 tokens in debt: earlier calls used more than they reserved), requested 18."},
		{name: "token bucket short, not in debt", unit: policy.UnitTokens, limit: tokenBucket, remaining: 5},
		{name: "token bucket empty, not in debt", unit: policy.UnitTokens, limit: tokenBucket, remaining: 0},
	}
	for _, c := range cases {
		rules := []meter.Applied{{Rule: &policy.Rule{Name: "user-tokens", Scope: policy.ScopeUser, Unit: c.unit},
			Key: "k", Limit: c.limit, Reserved: 18, Denied: true,
			Status: bucket.Status{Remaining: c.remaining, Reset: 90 * time.Minute}}}
		for _, f := range []Flavor{FlavorOpenAI, FlavorAnthropic} {
			var ctx fasthttp.RequestCtx
			e := denied(&ctx, f, rules, nil, 0, denial{retry: 31 * time.Minute})
			if c.want != "" && !strings.Contains(e.message, c.want) {
				t.Errorf("%s, %v: message %q, want it to contain %q", c.name, f, e.message, c.want)
			}
			if c.want == "" && strings.Contains(e.message, "in debt") {
				t.Errorf("%s, %v: message %q names a debt the bucket does not have", c.name, f, e.message)
			}
		}
	}
}
