package meter

import (
	"time"

	"github.com/llmguard/llmguard/policy"
)

// BudgetLevel is one quota's use right after a request settled: what
// Options.Alerts observes. Used and Quota are in Unit (micro-USD for a usd
// quota, else tokens or requests); Used may exceed Quota after
// reconciliation. PeriodStart and PeriodEnd bound the quota's calendar
// period, [start, end), in the quota's own time zone (its timezone:).
type BudgetLevel struct {
	Limit   string // the limit's name
	Scope   string // key, user, tenant or global
	Subject string // the key id, user or tenant the bucket is for; "" for global
	Tenant  string // the request's tenant
	Unit    string // "micro_usd", "tokens", "input_tokens", "output_tokens" or "requests"
	// Key is the bucket's store key: with PeriodStart it names the budget's
	// period uniquely.
	Key         string
	Used, Quota int64
	PeriodStart time.Time
	PeriodEnd   time.Time
	// Exhausted is set when the quota denied a request (one that was not
	// larger than the whole quota): it cannot pay that request, so it has
	// reached its 100 % threshold whatever Used says (a budget that denies
	// at 99.7 % still alerts at 1.0); lower and higher thresholds follow
	// Used alone.
	Exhausted bool
}

// Alerts is told every quota's level as each request settles (package
// alert decides which levels cross a threshold and sends them). Observe
// runs on the request path: it must not block, and must be safe for
// concurrent use.
type Alerts interface{ Observe(BudgetLevel) }

// budgetLevels tells Options.Alerts the level of each quota of x (shadow
// quotas excluded) right after settlement: its level at admission with this
// request's reservation replaced by what it really cost (settled[i], in
// rule i's unit), as budgetCrossings computes it.
//
// Levels of quotas judged by the per-node fallback (the store was down
// for them: Applied.Fallback) are not reported: they are this node's, not
// the budget's.
func (m *Meter) budgetLevels(x *Exchange, settled []int64) {
	if m.opt.Alerts == nil {
		return
	}
	for i := range x.rules {
		a := &x.rules[i]
		if !isQuota(a) || a.Fallback || i >= len(settled) {
			continue
		}
		m.opt.Alerts.Observe(levelOf(x.req.Principal, *a, settledLevel(a, settled[i])))
	}
}

// budgetExhausted tells Options.Alerts that quota rule i of x denied it:
// its level as the store holds it, marked Exhausted.
func (m *Meter) budgetExhausted(x *Exchange, i int) {
	if m.opt.Alerts == nil || i < 0 || i >= len(x.rules) || x.rules[i].Fallback {
		return
	}
	a := x.rules[i]
	if !isQuota(&a) {
		return
	}
	l := levelOf(x.req.Principal, a, a.Limit.Capacity-a.Status.Remaining)
	l.Exhausted = true
	m.opt.Alerts.Observe(l)
}

// levelOf is quota a's level at used units for principal pr.
func levelOf(pr policy.Principal, a Applied, used int64) BudgetLevel {
	l := BudgetLevel{Limit: a.Rule.Name, Scope: a.Rule.Scope.String(), Tenant: pr.Tenant, Unit: a.Rule.Unit.AmountUnit(),
		Key: a.Key, Used: used, Quota: a.Limit.Capacity, PeriodStart: a.Limit.WindowStart, PeriodEnd: a.Limit.WindowEnd}
	switch a.Rule.Scope {
	case policy.ScopeKey:
		l.Subject = pr.KeyID
	case policy.ScopeUser:
		l.Subject = pr.User
	case policy.ScopeTenant:
		l.Subject = pr.Tenant
	}
	return l
}
