package app

// Whose budgets a usage report reads and which period it covers: the
// principals of the keys in the file and the key store (active, revoked or
// expired), of pass-through callers, and of the tenants and users the
// ledger names, and the period and zone their quota limits choose.

import (
	"fmt"
	"slices"
	"time"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// reportWindow is the calendar period a report of q covers at now: q's
// period, else the budgets' (budgetPeriod), in q's zone, else theirs
// (budgetZone); extra are tenants known from the ledger's records
// (tenantPrincipals). Errors: an unknown period or zone (ErrUsageQuery).
func (a *App) reportWindow(q UsageQuery, now time.Time, extra []string) (usageWindow, error) {
	w := usageWindow{chosen: "query"}
	w.p, _ = spec.ParsePeriod(q.Period)
	switch {
	case q.Period == "":
		w.p, w.chosen = a.budgetPeriod(q.Tenant, now, extra)
	case w.p == 0:
		return w, fmt.Errorf("%w: period must be day, week or month", ErrUsageQuery)
	}
	w.loc = a.budgetZone(q.Tenant, w.p, now, extra)
	if q.TimeZone != "" {
		var err error
		if w.loc, err = loadZone(q.TimeZone); err != nil {
			return w, fmt.Errorf("%w: %w", ErrUsageQuery, err)
		}
	}
	w.start, w.end = w.p.Window(now, w.loc)
	return w, nil
}

// usageWindow is a report's period: its name, how it was chosen
// (ReportPeriod.Chosen), its zone and its bounds [start, end).
type usageWindow struct {
	p          policy.Period
	chosen     string
	loc        *time.Location
	start, end time.Time
}

// summaryTenants are the tenants sum has records of, (other) left out.
func summaryTenants(sum ledger.Summary) []string {
	out := make([]string, 0, len(sum.Tenants))
	for t := range sum.Tenants {
		if t != ledger.OtherName {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// ledgerNames are the tenants and users the ledger has records of in a
// report's period, which may have no key left (tenantPrincipals).
type ledgerNames struct {
	tenants []string
	users   []ledger.UserKey
	// sum is the report's ledger summary, read from from on; nil when
	// there is none (first then knows nothing).
	sum  *ledger.Summary
	from time.Time
}

// first is the instant of the first ledger record in the period starting
// at periodStart of rule r's subject pr (its tenant or user; every
// record's for a global rule in a report of every tenant), or zero when
// the summary cannot tell: no summary, one read from after periodStart,
// a subject it has no entry of (no record, or folded into
// ledger.OtherName) or a first record before periodStart, a key's rule
// (the summary keeps no key's records apart).
func (l ledgerNames) first(r *policy.Rule, pr policy.Principal, tenant string, periodStart time.Time) time.Time {
	if l.sum == nil || l.from.After(periodStart) {
		return time.Time{}
	}
	var t ledger.Totals
	switch r.Scope {
	case policy.ScopeTenant:
		t = l.sum.Tenants[pr.Tenant]
	case policy.ScopeUser:
		t = l.sum.Users[ledger.UserKey{Tenant: pr.Tenant, User: pr.User}]
	case policy.ScopeGlobal:
		if tenant == "" {
			t = l.sum.Total
		}
	}
	if t.Requests == 0 || t.First.Before(periodStart) {
		return time.Time{}
	}
	return t.First
}

// appliedQuotas calls fn for each quota limit that applies to tenant's
// principals (every principal's when tenant is ""), those of the file's
// keys, of the key store's active keys at now and of pass-through callers
// alike, and a tenant's alone when a limit names it and none of those is
// its, or extra (tenants the ledger has records of) names it
// (tenantPrincipals), once per principal it applies to; fn returns false
// to stop.
func (a *App) appliedQuotas(tenant string, now time.Time, extra []string, fn func(r *policy.Rule) bool) {
	pol := a.policy()
	prs, _, _ := a.tenantPrincipals(pol, tenant, now, ledgerNames{tenants: extra})
	for _, pr := range prs {
		if tenant != "" && pr.Tenant != tenant {
			continue
		}
		for i := range pol.Rules() {
			if r := &pol.Rules()[i]; r.IsQuota() && r.MatchesPrincipal(pr) && !fn(r) {
				return
			}
		}
	}
}

// quotaPrincipals are the principals whose quotas a usage report reads:
// the config file's keys, the key store's keys active at now and, with
// identity.pass_through on, the principal pass-through callers share
// (policy.Policy.PassThroughPrincipal; trial7: a pass-through config's
// daily budget was reported as "no budget applies", over the month).
func (a *App) quotaPrincipals(pol *policy.Policy, now time.Time) []policy.Principal {
	out := append(pol.Principals(), a.storePrincipals(pol, now)...)
	if pr, ok := pol.PassThroughPrincipal(); ok {
		out = append(out, pr)
	}
	return out
}

// tenantPrincipals are quotaPrincipals, plus the principal of a tenant
// alone (no key, user or plan) for each tenant without a principal among
// them that a quota limit names in its `tenants:`, that the key store's
// revoked or expired keys belong to (formerStorePrincipals), or that
// led.tenants lists (UsageIn: the tenants the ledger has records of in the
// period):
// tenant's alone when tenant is named, every such tenant's when tenant is
// "" (the fleet's report). A tenant whose keys are all revoked or expired
// (or removed from the file) keeps its budgets' spend of the period: its
// report keeps their rows, period and zone (trial12: `usage --tenant acme`
// after acme's keys were revoked said "no budget applies", dropped the
// budget's row and reported the month in UTC instead of the budget's
// Europe/Paris), and so does the fleet's report, which covers what every
// tenant's report covers (trial13: without --tenant, a tenant's daily
// budget with spend had no row once its last key was revoked). A tenant
// none of these knows (a misspelt one) gets none, as before. The
// principals from former on are those of tenants known only from the key
// store's revoked or expired keys; those from gone on are the revoked or
// expired stored keys' own (key, user, tenant, plan) and, for each user of
// led.users no principal before has, that user's (tenant and user, no key
// or plan: a file's key removed), so that a user with no key left keeps
// its user budgets' rows, and a revoked key its key budgets' (trial14).
// tenant, when not "", keeps only its tenant's.
func (a *App) tenantPrincipals(pol *policy.Policy, tenant string, now time.Time, led ledgerNames) (prs []policy.Principal, former, gone int) {
	prs = a.quotaPrincipals(pol, now)
	has := make(map[string]bool) // tenants with a principal, or added one
	for _, pr := range prs {
		has[pr.Tenant] = true
	}
	add := func(t string) {
		if t != "" && (tenant == "" || t == tenant) && !has[t] {
			has[t] = true
			prs = append(prs, policy.Principal{Tenant: t})
		}
	}
	for i := range pol.Rules() {
		if r := &pol.Rules()[i]; r.IsQuota() {
			for _, t := range r.Tenants() {
				add(t)
			}
		}
	}
	for _, t := range led.tenants {
		add(t)
	}
	former = len(prs)
	formerKeys := a.formerStorePrincipals(now, time.Time{})
	for _, pr := range formerKeys {
		add(pr.Tenant)
	}
	gone = len(prs)
	users := make(map[ledger.UserKey]bool) // users with a principal
	for _, pr := range prs {
		users[ledger.UserKey{Tenant: pr.Tenant, User: pr.User}] = true
	}
	for _, pr := range a.formerStorePrincipals(now, quotaWindowsStart(pol, now)) {
		if tenant == "" || pr.Tenant == tenant {
			users[ledger.UserKey{Tenant: pr.Tenant, User: pr.User}] = true
			prs = append(prs, pr)
		}
	}
	for _, u := range led.users {
		if (tenant == "" || u.Tenant == tenant) && !users[u] {
			users[u] = true
			prs = append(prs, policy.Principal{Tenant: u.Tenant, User: u.User})
		}
	}
	return prs, former, gone
}

// quotaWindowsStart is the earliest start of the quota limits' periods
// containing now: a key that ended before it used nothing any budget
// still counts. Zero when pol has no quota limit.
func quotaWindowsStart(pol *policy.Policy, now time.Time) time.Time {
	var start time.Time
	for i := range pol.Rules() {
		if r := &pol.Rules()[i]; r.IsQuota() {
			if s := r.LimitAt(now).WindowStart; start.IsZero() || s.Before(start) {
				start = s
			}
		}
	}
	return start
}

// appliesTo reports whether quota rule r has a bucket of principal pr to
// read: r matches pr and, for the pass-through principal (which has no
// user or key of its own) and a tenant's alone (tenantPrincipals: no key,
// no user), r is a tenant or global rule, whose bucket is the same for
// every caller of the tenant; for a user known from the ledger alone (no
// key), r is not a key rule.
func appliesTo(r *policy.Rule, pr policy.Principal) bool {
	if (pr.PassThrough || pr.KeyID == "") && pr.User == "" && (r.Scope == policy.ScopeUser || r.Scope == policy.ScopeKey) {
		return false
	}
	if pr.KeyID == "" && r.Scope == policy.ScopeKey {
		return false
	}
	return r.MatchesPrincipal(pr)
}

// budgetPeriod is the period of a report that names none: the longest
// period of the quotas that apply to tenant (appliedQuotas), chosen
// "budgets", or the month, chosen "default", when none applies. A config
// whose budgets are all daily reports today, not a month in which a daily
// budget is one row among thirty days of spend; one with a monthly budget
// beside daily ones reports the month, as before (each quota row still
// shows its own period).
func (a *App) budgetPeriod(tenant string, now time.Time, extra []string) (p policy.Period, chosen string) {
	a.appliedQuotas(tenant, now, extra, func(r *policy.Rule) bool {
		p = max(p, r.Period)
		return p < policy.PeriodMonth
	})
	if p == 0 {
		return policy.PeriodMonth, "default"
	}
	return p, "budgets"
}

// budgetZone is the zone of a report over period p: that of the quota
// limits of period p that apply to tenant's principals (every principal's
// when tenant is ""), those of the file's keys and of the key store's
// active keys at now alike, when they all share one; when none of them has
// period p, that of the quotas of any period, likewise; else UTC. A month's
// report follows the monthly budgets (as `llmguard report` does), so that a
// daily quota in another zone (UTC by default) does not move it to UTC.
func (a *App) budgetZone(tenant string, p policy.Period, now time.Time, extra []string) *time.Location {
	// zoneOf is the zone the quotas that fit samePeriod share: ok false when
	// none fits, UTC when they disagree.
	zoneOf := func(samePeriod bool) (zone *time.Location, ok bool) {
		a.appliedQuotas(tenant, now, extra, func(r *policy.Rule) bool {
			if r.Location == nil || (samePeriod && r.Period != p) {
				return true
			}
			if zone != nil && zone.String() != r.Location.String() {
				zone = time.UTC
				return false
			}
			zone = r.Location
			return true
		})
		return zone, zone != nil
	}
	if zone, ok := zoneOf(true); ok {
		return zone
	}
	if zone, ok := zoneOf(false); ok {
		return zone
	}
	return time.UTC
}
