package meter

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

type levels []BudgetLevel

func (l *levels) Observe(b BudgetLevel) { *l = append(*l, b) }

// budgetLevels reports each quota's level after settlement — spend, not
// the reservation: admission level less this request's reservation plus
// what it really cost — with the subject of the quota's scope, micro_usd
// for a dollar quota, and the period in the quota's zone; rate limits are
// not reported.
func TestBudgetLevelsFollowSpend(t *testing.T) {
	got := &levels{}
	m := &Meter{log: slog.New(slog.NewTextHandler(io.Discard, nil)), opt: Options{Alerts: got}}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, tokyo)
	x := &Exchange{m: m, req: Request{Principal: policy.Principal{KeyID: "k1", User: "alice", Tenant: "acme"}}}
	x.rules = []Applied{
		{Rule: &policy.Rule{Name: "acme-usd", Scope: policy.ScopeTenant, Unit: policy.UnitUSD, Period: policy.PeriodMonth},
			Key: "q:acme-usd", Limit: bucket.Quota(1000, start, start.AddDate(0, 1, 0)), Reserved: 300,
			Status: bucket.Status{Remaining: 1000 - 400 - 300}}, // 400 spent before, 300 reserved now
		{Rule: &policy.Rule{Name: "user-rate", Scope: policy.ScopeUser, Unit: policy.UnitTokens},
			Key: "r:alice", Limit: bucket.Limit{Capacity: 100, Rate: 10, Per: time.Second}, Reserved: 5},
		{Rule: &policy.Rule{Name: "user-tokens", Scope: policy.ScopeUser, Unit: policy.UnitTokens, Period: policy.PeriodDay},
			Key: "q:alice", Limit: bucket.Quota(50, start, start.AddDate(0, 0, 1)), Reserved: 20, Status: bucket.Status{Remaining: 10}},
	}
	m.budgetLevels(x, []int64{25, 5, 12})
	if len(*got) != 2 {
		t.Fatalf("levels %+v, want the two quotas", *got)
	}
	usd, tok := (*got)[0], (*got)[1]
	if usd.Used != 425 || usd.Quota != 1000 || usd.Unit != "micro_usd" || usd.Subject != "acme" || usd.Tenant != "acme" ||
		usd.Limit != "acme-usd" || !usd.PeriodStart.Equal(start) || usd.PeriodStart.Location() != tokyo {
		t.Errorf("usd level %+v: want 400 spent + 25 settled = 425 of 1000 micro_usd for acme, period in Tokyo", usd)
	}
	if tok.Used != 50-10-20+12 || tok.Subject != "alice" || tok.Unit != "tokens" || tok.Scope != "user" {
		t.Errorf("token level %+v: want 32 tokens for alice", tok)
	}
}

// A quota that denies a request is reported Exhausted at its level in the
// store; a request admitted by the per-node fallback reports nothing.
func TestBudgetExhausted(t *testing.T) {
	got := &levels{}
	m := &Meter{log: slog.New(slog.NewTextHandler(io.Discard, nil)), opt: Options{Alerts: got}}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	x := &Exchange{m: m, req: Request{Principal: policy.Principal{Tenant: "acme"}}}
	x.rules = []Applied{{Rule: &policy.Rule{Name: "acme-usd", Scope: policy.ScopeTenant, Unit: policy.UnitUSD, Period: policy.PeriodMonth},
		Key: "q", Limit: bucket.Quota(1000, start, start.AddDate(0, 1, 0)), Reserved: 50, Status: bucket.Status{Remaining: 3}}}
	m.budgetExhausted(x, 0)
	if len(*got) != 1 || !(*got)[0].Exhausted || (*got)[0].Used != 997 {
		t.Fatalf("levels %+v, want one exhausted at 997", *got)
	}
	x.fallback, x.rules[0].Fallback = true, true // as take sets them: the rule judged by the fallback
	m.budgetExhausted(x, 0)
	m.budgetLevels(x, []int64{10})
	if len(*got) != 1 {
		t.Errorf("fallback levels reported: %+v", (*got)[1:])
	}
}
