package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/proxy"
	"github.com/llmguard/llmguard/spec"
)

// UsageReport is the body of GET /admin/usage and of `llmguard usage
// --json`: spend and tokens from the ledger, per tenant, user and model,
// and every quota's state from the store, over one calendar period.
type UsageReport struct {
	Tenant string       `json:"tenant,omitempty"` // the filter; empty: every tenant
	Period ReportPeriod `json:"period"`
	// Spend is the ledger's total over the period (micro-USD exact; USD
	// for reading).
	Spend Spend `json:"spend"`
	// BurnRateUSDPerDay is Spend over the days elapsed in the period.
	BurnRateUSDPerDay float64      `json:"burn_rate_usd_per_day"`
	Requests          int64        `json:"requests"`
	Tokens            TokenTotals  `json:"tokens"`
	ByTenant          []UsageRow   `json:"by_tenant"`
	ByUser            []UsageRow   `json:"by_user"`
	ByModel           []UsageRow   `json:"by_model"`
	Quotas            []QuotaState `json:"quotas"`
	// Source names where the spend was read: the ledger file or stream.
	Source string `json:"source"`
	// UnreadableLines counts the ledger lines skipped as unreadable (a
	// torn or foreign line): Spend is short by theirs.
	UnreadableLines int64 `json:"unreadable_lines"`
	// Note, when a tenant was asked for (Tenant set), the period has no
	// request of it and nothing is used of any quota, says so and what
	// to check: that no key (config or key store) names the tenant, so
	// likely a misspelling, or that its keys sent nothing, or that no
	// ledger is kept. Omitted (absent from the JSON) otherwise.
	Note string `json:"note,omitempty"`
	// UnknownTenant is true when Note says the asked-for tenant is likely
	// misspelt: no key in the config or key store names it and the ledger
	// has no record of it (the report is empty). Omitted (false)
	// otherwise, a tenant with keys and no request included. A CSV answer
	// carries it as the UnknownTenantHeader response header. `llmguard
	// usage` exits 2 on it unless --allow-unknown-tenant.
	UnknownTenant bool `json:"unknown_tenant,omitempty"`
}

// ReportPeriod is the calendar period a report covers, [Start, End).
type ReportPeriod struct {
	Name string `json:"name"` // day, week or month
	// Chosen says how Name was picked: "query" (the query named it),
	// "budgets" (none was named: the longest period of the quotas that
	// apply, UsageQuery.Period) or "default" (none was named and no quota
	// applies: month).
	Chosen string `json:"chosen"`
	// Start and End are midnights in TimeZone (RFC 3339 with its offset in
	// JSON).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// TimeZone is the IANA zone of Start and End (UsageQuery.TimeZone).
	TimeZone string `json:"timezone"`
}

// Spend is an amount of money, exact in micro-USD.
type Spend struct {
	MicroUSD int64   `json:"micro_usd"`
	USD      float64 `json:"usd"`
}

func spendOf(microUSD int64) Spend { return Spend{MicroUSD: microUSD, USD: float64(microUSD) / 1e6} }

// TokenTotals are token counts (input includes cached and cache writes;
// output includes reasoning).
type TokenTotals struct {
	Input       int64 `json:"input"`
	CachedInput int64 `json:"cached_input"`
	CacheWrite  int64 `json:"cache_write"`
	Output      int64 `json:"output"`
	Reasoning   int64 `json:"reasoning"`
}

// UsageRow is one tenant's, user's or model's share of the period.
type UsageRow struct {
	Tenant   string      `json:"tenant,omitempty"`
	User     string      `json:"user,omitempty"`
	Model    string      `json:"model,omitempty"`
	Spend    Spend       `json:"spend"`
	Requests int64       `json:"requests"`
	Errors   int64       `json:"errors"`
	Tokens   TokenTotals `json:"tokens"`
}

// QuotaState is one quota bucket as the store holds it now.
type QuotaState struct {
	Limit   string `json:"limit"`
	Scope   string `json:"scope"`
	Subject string `json:"subject"` // tenant, user or key id; "" for global
	Tenant  string `json:"tenant,omitempty"`
	Unit    string `json:"unit"` // tokens, requests, …, micro_usd
	// Model is the priced model of a per_model limit's bucket ("%unpriced":
	// the one every model without a price shares); "" for other limits.
	// Only a per_model limit's buckets with spend are listed.
	Model string `json:"model,omitempty"`
	// Quota, Used and Remaining are in Unit; Used may exceed Quota after
	// reconciliation.
	Quota        int64     `json:"quota"`
	Used         int64     `json:"used"`
	Remaining    int64     `json:"remaining"`
	UsedFraction float64   `json:"used_fraction"`
	PeriodStart  time.Time `json:"period_start"`
	PeriodEnd    time.Time `json:"period_end"`
	// DaysLeft is how long Remaining lasts at the burn rate observed (Used
	// over the days from RateFrom to the report's time), in days, capped
	// at the days until PeriodEnd, when the quota resets whatever is
	// left; -1 when nothing was used yet.
	DaysLeft float64 `json:"days_left"`
	// RateFrom is the start of the span DaysLeft's burn rate is measured
	// over, and RateBasis why it starts there (rateSpan): "period" (the
	// period's start), "limit_added" (the config reload that added the
	// limit, its bucket empty until then), "first_record" (the subject's
	// first ledger record in the period) or "min_span" (either of those
	// was under MinRateSpan before the report: the last MinRateSpan).
	// trial26: a budget added partway through a month that spent 84% in a
	// minute showed 1.3 days left at the whole month's average.
	RateFrom  time.Time `json:"rate_from"`
	RateBasis string    `json:"rate_basis"`
	// LastsPeriod is true when the cap applied: at the burn rate so far
	// the quota outlasts its period (a daily quota barely used would show
	// tens of thousands of days otherwise).
	LastsPeriod bool `json:"lasts_period,omitempty"`
}

// The values of QuotaState.RateBasis.
const (
	RatePeriod      = "period"
	RateLimitAdded  = "limit_added"
	RateFirstRecord = "first_record"
	RateMinSpan     = "min_span"
)

// MinRateSpan is the shortest span a quota's burn rate is measured over
// when it starts later than its period (rateSpan): a single request just
// after a limit was added or a subject's first record would otherwise
// make its whole amount a rate per millisecond.
const MinRateSpan = time.Hour

// rateSpan is where a quota's burn rate starts at now, and why
// (QuotaState.RateBasis): the latest of the period's start, added (when a
// reload added the limit; zero: in force since the start) and first (the
// subject's first ledger record in the period; zero: none known), but no
// later than MinRateSpan before now unless that is before the period's
// start. The quota's bucket counted nothing before added, and its subject
// spent nothing before first: an average over the whole period would
// spread the spend over time it was not counted in.
func rateSpan(periodStart, added, first, now time.Time) (from time.Time, basis string) {
	from, basis = periodStart, RatePeriod
	if added.After(from) {
		from, basis = added, RateLimitAdded
	}
	if first.After(from) {
		from, basis = first, RateFirstRecord
	}
	if basis != RatePeriod && now.Sub(from) < MinRateSpan {
		if from = now.Add(-MinRateSpan); !from.After(periodStart) {
			return periodStart, RatePeriod
		}
		basis = RateMinSpan
	}
	return from, basis
}

// daysLeft is how many days remaining units last when used units were
// spent over the days from start (the period's, or rateSpan's) to now, capped at the days from now to
// end (the period's reset), and whether that cap applied; -1 when nothing
// was used or no time has passed.
func daysLeft(used, remaining int64, start, end, now time.Time) (days float64, lastsPeriod bool) {
	elapsed := now.Sub(start).Hours() / 24
	if used <= 0 || elapsed <= 0 {
		return -1, false
	}
	days = float64(max(remaining, 0)) / (float64(used) / elapsed)
	if toEnd := max(end.Sub(now).Hours()/24, 0); days >= toEnd {
		return toEnd, true
	}
	return days, false
}

// UsageQuery selects a usage report: whose, over which period, in which
// time zone. Its zero value is every tenant's current period of the
// budgets (month when there is none) in the budgets' zone.
type UsageQuery struct {
	Tenant string // "" = every tenant
	// Period is "day", "week" or "month"; "" = the longest period of the
	// quota limits that apply (to Tenant's principals, or to every
	// principal), so that a config whose budgets are all daily reports
	// today; month when no quota applies.
	Period string
	// TimeZone is the IANA zone whose midnights bound the period. "" = the
	// zone of the quota limits of Period that apply (to Tenant's
	// principals, or to every principal) when they all share one; when
	// none has Period, that of the quotas of any period, likewise; else UTC.
	TimeZone string
}

// maxUsageNames bounds the distinct tenants, users and models a usage
// read-out keeps apart; further ones are added up under ledger.OtherName.
const maxUsageNames = 100_000

// maxUsageModels bounds the distinct models a usage read-out keeps apart;
// further ones are added up under ledger.OtherName. A model name is
// whatever a caller sends (up to 256 bytes; the ledger records names
// nothing prices too): 100,000 of them made /admin/usage answer 92 MB,
// past the 64 MiB `llmguard usage` reads, which then failed, and hold some
// 500 MB per read. No deployment prices anywhere near this many models.
const maxUsageModels = 1000

// usageWait is the longest a /admin/usage request waits for the read
// before it (one runs at a time) to end; past it, 503 with Retry-After.
// Well below the 30 s `llmguard usage` waits for a whole answer, so that
// the command shows the 503's reason rather than its own timeout.
const usageWait = 10 * time.Second

// maxZoneName bounds a time zone name from a caller, in bytes.
const maxZoneName = 64

// Usage builds the report for tenant ("" = all) over the calendar period
// ("day", "week" or "month"; "" = the budgets', see UsageQuery.Period)
// containing now, in the budgets' time zone (see UsageQuery). Errors: as
// UsageIn.
func (a *App) Usage(ctx context.Context, tenant, period string) (*UsageReport, error) {
	return a.UsageIn(ctx, UsageQuery{Tenant: tenant, Period: period})
}

// ErrUsageQuery wraps UsageIn's errors that come from the query (an
// unknown period, format or time zone), as opposed to a ledger or store
// that cannot be read: /admin/usage answers the first 400, the second 503.
var ErrUsageQuery = errors.New("usage query")

// UsageIn builds the report q selects over the calendar period containing
// now. Errors: an unknown period or time zone (wrapping ErrUsageQuery), or
// a ledger or quota store that cannot be read.
func (a *App) UsageIn(ctx context.Context, q UsageQuery) (*UsageReport, error) {
	tenant := q.Tenant
	now := a.now()
	w, err := a.reportWindow(q, now, nil)
	if err != nil {
		return nil, err
	}
	sum, source, err := a.summarizeLedger(ctx, ledger.Filter{Tenant: tenant, From: w.start, To: w.end})
	if err != nil {
		return nil, err
	}
	// A tenant known only from the ledger's records (its keys removed from
	// the file, and no limit naming it) has budgets too: those that apply
	// to any of its callers. When they choose another period or zone than
	// the first read's, the ledger is read again over theirs (trial14:
	// `usage --tenant initech`, whose weekly budget was listed, reported
	// the month, chosen "default").
	ledgerTenants := summaryTenants(sum)
	// Over the same instants (only how they were chosen, or the zone's
	// name, differs) the first read stands.
	cand, _ := a.reportWindow(q, now, ledgerTenants)
	same := cand.start.Equal(w.start) && cand.end.Equal(w.end)
	if w = cand; !same {
		if sum, source, err = a.summarizeLedger(ctx, ledger.Filter{Tenant: tenant, From: w.start, To: w.end}); err != nil {
			return nil, err
		}
		// The first read's tenants stay: a tenant with records earlier in
		// the month keeps its budgets' rows in a report of today. A set,
		// not a scan per tenant: a fleet's ledger names up to
		// maxUsageNames of them.
		first := make(map[string]bool, len(ledgerTenants))
		for _, t := range ledgerTenants {
			first[t] = true
		}
		for _, t := range summaryTenants(sum) {
			if !first[t] {
				ledgerTenants = append(ledgerTenants, t)
			}
		}
	}
	start, loc := w.start, w.loc
	// The lists start empty, not nil, so that the JSON answer has [] where
	// nothing was spent (a reader iterating them, jq's .by_tenant[], fails
	// on null).
	rep := &UsageReport{Tenant: tenant, Period: ReportPeriod{Name: w.p.String(), Chosen: w.chosen, Start: start, End: w.end, TimeZone: loc.String()},
		ByTenant: []UsageRow{}, ByUser: []UsageRow{}, ByModel: []UsageRow{}}
	rep.Source = source
	rep.UnreadableLines = sum.Unreadable
	rep.Spend = spendOf(sum.Total.CostMicroUSD)
	rep.Requests = sum.Total.Requests
	rep.Tokens = tokenTotals(sum.Total)
	if days := now.Sub(start).Hours() / 24; days > 0 {
		rep.BurnRateUSDPerDay = rep.Spend.USD / days
	}
	for t, v := range sum.Tenants {
		rep.ByTenant = append(rep.ByTenant, row(v, UsageRow{Tenant: t}))
	}
	for k, v := range sum.Users {
		rep.ByUser = append(rep.ByUser, row(v, UsageRow{Tenant: k.Tenant, User: k.User}))
	}
	for m, v := range sum.Models {
		rep.ByModel = append(rep.ByModel, row(v, UsageRow{Model: m}))
	}
	for _, rows := range [][]UsageRow{rep.ByTenant, rep.ByUser, rep.ByModel} {
		sort.Slice(rows, func(i, j int) bool { return rows[i].Spend.MicroUSD > rows[j].Spend.MicroUSD })
	}
	led := ledgerNames{tenants: ledgerTenants}
	for k := range sum.Users {
		if k.Tenant != ledger.OtherName && k.User != "" {
			led.users = append(led.users, k)
		}
	}
	// Map order would otherwise order the principals, and with them which
	// of two principals' rows of one bucket comes first.
	slices.SortFunc(led.users, func(x, y ledger.UserKey) int {
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.User, y.User))
	})
	led.sum, led.from = &sum, w.start
	rep.Quotas, err = a.quotas(ctx, tenant, now, led)
	if rep.Quotas == nil {
		rep.Quotas = []QuotaState{}
	}
	if err == nil {
		rep.Note, rep.UnknownTenant = a.emptyTenantNote(rep, now, slices.Contains(ledgerTenants, tenant))
	}
	return rep, err
}

// emptyTenantNote is UsageReport.Note for rep, built at now: "" unless
// rep is of one tenant with no request in the period and nothing used of
// any quota; unknown is UsageReport.UnknownTenant (the note says the
// tenant is likely misspelt). inLedger says the ledger has records of the
// tenant in a window read first (UsageIn: the month, before its budgets'
// day).
func (a *App) emptyTenantNote(rep *UsageReport, now time.Time, inLedger bool) (note string, unknown bool) {
	if rep.Tenant == "" || rep.Requests != 0 || slices.ContainsFunc(rep.Quotas, func(q QuotaState) bool { return q.Used != 0 }) {
		return "", false
	}
	pol := a.policy()
	known := slices.ContainsFunc(a.quotaPrincipals(pol, now), func(pr policy.Principal) bool { return pr.Tenant == rep.Tenant })
	switch {
	case !known && slices.ContainsFunc(a.formerStorePrincipals(now, time.Time{}), func(pr policy.Principal) bool { return pr.Tenant == rep.Tenant }):
		// Not a misspelling: the key store knows the tenant (trial13).
		return fmt.Sprintf("tenant %q has no active key (its stored keys are revoked or expired) and no request in this period", rep.Tenant), false
	case !known && inLedger:
		// Not a misspelling either: its records this month are older than
		// its budgets' period (trial14).
		return fmt.Sprintf("tenant %q has no key (its keys were removed from the file) and no request in this period; the ledger has records of it from before this period, so it is not a misspelling", rep.Tenant), false
	case !known:
		return fmt.Sprintf("no keys or records for tenant %q in this period: check its spelling (`llmguard usage` without --tenant, or /admin/usage without tenant=, lists every tenant with spend)", rep.Tenant), true
	case rep.Source == "none":
		return fmt.Sprintf("tenant %q has keys but nothing used of any quota, and no ledger is configured, so its requests are not counted", rep.Tenant), false
	}
	// The ledger holds forwarded requests only: a tenant whose every call
	// was refused (a budget too small for its requests) has none there
	// (trial4: such a tenant was told to check its spelling).
	return fmt.Sprintf("tenant %q has keys but no request in this period and nothing used of any quota: the ledger records only the requests llmguard forwarded, so calls it refused (401, 403, 429) are not here; llmguard_requests_total counts them", rep.Tenant), false
}

// loadZone loads an IANA zone named by a caller. Errors: too long, or
// unknown.
func loadZone(name string) (*time.Location, error) {
	if len(name) > maxZoneName {
		return nil, fmt.Errorf("timezone: at most %d bytes", maxZoneName)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone: unknown time zone %q (want an IANA name such as UTC or Europe/Paris)", name)
	}
	return loc, nil
}

func row(t ledger.Totals, r UsageRow) UsageRow {
	r.Spend, r.Requests, r.Errors, r.Tokens = spendOf(t.CostMicroUSD), t.Requests, t.Errors, tokenTotals(t)
	return r
}

func tokenTotals(t ledger.Totals) TokenTotals {
	return TokenTotals{Input: t.InputTokens, CachedInput: t.CachedInputTokens, CacheWrite: t.CacheWriteTokens,
		Output: t.OutputTokens, Reasoning: t.ReasoningTokens}
}

// summarizeLedger sums the records f selects from the ledger file, else
// the stream. No ledger configured: an empty summary. The file and its
// backups are read record by record into the summary, never held whole
// (a year of ledger is gigabytes: reading it all into memory took a node
// past 1.3 GB for 400 MB of ledger, at every /admin/usage), and a backup
// last written before f.From is not read at all: a record's ts is taken
// before the record is written.
func (a *App) summarizeLedger(ctx context.Context, f ledger.Filter) (ledger.Summary, string, error) {
	lc := a.cfg.Load().Ledger
	if a.Ledger != nil {
		if err := a.Ledger.Flush(ctx); err != nil && !errors.Is(err, ledger.ErrClosed) {
			a.log.Warn("ledger flush before a report", "err", err)
		}
	}
	// A caller chooses its model names: the breakdowns are bounded as the
	// monthly report's are.
	sum := ledger.Summary{Filter: f, MaxNames: maxUsageNames, MaxModels: maxUsageModels}
	switch {
	case lc.File != "":
		files, err := ledger.Files(lc.File)
		if errors.Is(err, fs.ErrNotExist) {
			return sum, "file", nil
		}
		if err != nil {
			return sum, "file", err
		}
		for _, name := range files {
			if fi, err := os.Stat(name); err == nil && !f.From.IsZero() && fi.ModTime().Before(f.From) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return sum, "file", err
			}
			bad, err := ledger.ReadFileContext(ctx, name, func(r ledger.Record) { sum.Add(r) })
			sum.Unreadable += int64(bad)
			if err != nil && !errors.Is(err, fs.ErrNotExist) { // a backup removed since listed holds nothing now
				return sum, "file", err
			}
		}
		return sum, "file", nil
	case lc.RedisStream != "" && a.ledgerRedis != nil:
		bad, err := ledger.ScanStream(ctx, a.ledgerRedis, lc.RedisStream, f.From, f.To, func(r ledger.Record) { sum.Add(r) })
		sum.Unreadable += int64(bad)
		return sum, "redis_stream", err
	}
	return sum, "none", nil
}

// quotas reads every quota bucket of the tenant's principals
// (tenantPrincipals, with led: the tenants and users the ledger has
// records of in the period) with a cost-0 take: it changes nothing and
// reports each bucket's remaining. The fleet's report (tenant "") leaves
// out a row of a tenant known only from revoked or expired stored keys
// that used nothing this period; every report leaves out the rows of a
// revoked or expired key, or of a user with no key left, that used
// nothing this period.
func (a *App) quotas(ctx context.Context, tenant string, now time.Time, led ledgerNames) ([]QuotaState, error) {
	pol := a.policy()
	var out []QuotaState
	seen := map[string]bool{}
	prs, former, gone := a.tenantPrincipals(pol, tenant, now, led)
	for i, pr := range prs {
		if tenant != "" && pr.Tenant != tenant {
			continue
		}
		// The fleet's report lists a tenant known only from revoked or
		// expired stored keys only where it used something this period:
		// every tenant such a key ever belonged to would otherwise add
		// its zero rows.
		quiet := (tenant == "" && i >= former) || i >= gone
		for i := range pol.Rules() {
			r := &pol.Rules()[i]
			if !r.IsQuota() || !appliesTo(r, pr) {
				continue
			}
			for _, model := range quotaModels(pol, r) {
				key := r.ModelKey(pr, model)
				if seen[key] {
					continue
				}
				seen[key] = true
				limit := r.LimitAt(now)
				st, err := a.quotaStatus(ctx, r, pr, model, key, limit)
				if err != nil {
					return out, err
				}
				q := QuotaState{Limit: r.Name, Scope: r.Scope.String(), Subject: subjectOf(r, pr), Tenant: pr.Tenant,
					Unit: r.Unit.AmountUnit(), Quota: limit.Capacity, Used: limit.Capacity - st.Remaining, Remaining: st.Remaining,
					PeriodStart: limit.WindowStart, PeriodEnd: limit.WindowEnd, DaysLeft: -1}
				if quiet && q.Used == 0 && r.Scope != spec.ScopeGlobal {
					continue
				}
				if r.PerModel {
					if q.Used == 0 {
						continue
					}
					q.Model = cmp.Or(model, policy.UnpricedModelKey)
				}
				q.UsedFraction = float64(q.Used) / float64(max(q.Quota, 1))
				var added time.Time
				if m := a.limitsAdded.Load(); m != nil {
					added = (*m)[r.Name]
				}
				q.RateFrom, q.RateBasis = rateSpan(limit.WindowStart, added, led.first(r, pr, tenant, limit.WindowStart), now)
				q.DaysLeft, q.LastsPeriod = daysLeft(q.Used, q.Remaining, q.RateFrom, limit.WindowEnd, now)
				out = append(out, q)
			}
		}
	}
	slices.SortFunc(out, func(x, y QuotaState) int { return strings.Compare(x.Limit+x.Subject, y.Limit+y.Subject) })
	return out, nil
}

// quotaStatus reads a quota bucket (key, or the shards of a sharded rule r
// for pr and model) with a cost-0 take, which changes nothing: the whole
// quota's Remaining (the sum of its shards') and Reset.
func (a *App) quotaStatus(ctx context.Context, r *policy.Rule, pr policy.Principal, model, key string, limit bucket.Limit) (bucket.Status, error) {
	items := []bucket.Item{{Key: key, Limit: limit}}
	if r.Shards > 1 {
		keys := r.ShardKeys(pr, model)
		items = make([]bucket.Item, r.Shards)
		for i := range items {
			items[i] = bucket.Item{Key: keys.Key(i), Limit: bucket.ShardLimit(limit, r.Shards, i)}
		}
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d, err := a.Store.Take(tctx, "", items)
	if err != nil {
		return bucket.Status{}, err
	}
	st := bucket.Status{Reset: d.Buckets[0].Reset}
	for _, b := range d.Buckets {
		st.Remaining += b.Remaining
	}
	return st, nil
}

// quotaModels are the model labels whose buckets a quota keeps: "" alone
// for a shared bucket; for a per_model quota every priced model its model
// matchers fit, sorted, and "" for the unpriced models' bucket.
func quotaModels(pol *policy.Policy, r *policy.Rule) []string {
	if !r.PerModel {
		return []string{""}
	}
	var out []string
	for _, m := range pol.PricedModels() {
		if r.MatchesModel(m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return append(out, "")
}

func subjectOf(r *policy.Rule, pr policy.Principal) string {
	switch r.Scope {
	case policy.ScopeKey:
		return pr.KeyID
	case policy.ScopeUser:
		return pr.User
	case policy.ScopeTenant:
		return pr.Tenant
	}
	return ""
}

// UnknownTenantHeader is the response header of a CSV answer of
// /admin/usage (format=csv) whose tenant is likely misspelt
// (UsageReport.UnknownTenant), with the value "true"; absent otherwise. A
// JSON answer says it in its unknown_tenant field.
const UnknownTenantHeader = "X-Llmguard-Unknown-Tenant"

// usageHandler serves GET
// /admin/usage?tenant=…&period=day|week|month&timezone=…&format=json|csv
// (UsageQuery: period absent = the budgets' period; CSV: WriteUsageCSV). With
// admin_token_env set it requires `Authorization: Bearer <token>`;
// without, it answers loopback clients only.
func (a *App) usageHandler(ctx *fasthttp.RequestCtx) {
	if _, ok := a.adminGate(ctx); !ok {
		return
	}
	ctx.SetContentType("application/json")
	fail := func(status int, msg string) {
		ctx.SetStatusCode(status)
		b, _ := json.Marshal(errorBody{msg})
		ctx.SetBody(b)
	}
	args := ctx.QueryArgs()
	if fp := args.Peek("config_sha256"); len(fp) > 0 {
		// `llmguard usage --config X` sends X's fingerprint: a node
		// serving another config (another llmguard on this address, or
		// X edited and its reload refused) would answer with its own
		// ledger, tenants and zones, and the caller would take them for X's.
		if mine := a.cfg.Load().Fingerprint(); string(fp) != mine {
			// trial16: `usage --admin host:port` without --config sends
			// the embedded default's fingerprint, and the 409 did not say
			// how to ask the node anyway.
			why := "another llmguard may be listening on this address, or the file was changed and its reload refused (see /readyz last_reload_error); " +
				"name the node's own file with --config, or pass --any-config to ask it anyway"
			if pending := a.reloads.pendingRestart(); len(pending) > 0 {
				// trial10: a reload that changed store (nodes: 2, as the
				// README's second node asks) took, kept the running store,
				// and the old text sent the operator to a reload error
				// that /readyz did not have.
				why = fmt.Sprintf("its file was reloaded, but changes %s, which apply only at restart (/readyz restart_pending), "+
					"so it still serves the ones it started with: restart it, or pass --any-config; else another llmguard may be listening on this address",
					strings.Join(pending, ", "))
			}
			fail(fasthttp.StatusConflict, fmt.Sprintf("this llmguard serves another config (fingerprint %.12s) than the one the caller named (%.12q): %s", mine, fp, why))
			return
		}
	}
	// One read at a time: each scans the whole ledger and holds its
	// breakdowns and answer (hundreds of MB for a ledger of 100,000
	// callers' users), and 256 admin connections reading at once held
	// them all (12 at once: 1.9 GB, over a memory limit of 808 MiB).
	t := time.NewTimer(cmp.Or(a.usageWait, usageWait))
	select {
	case a.usageSlot <- struct{}{}:
		t.Stop()
		defer func() { <-a.usageSlot }()
	case <-t.C:
		ctx.Response.Header.Set("Retry-After", "5")
		fail(fasthttp.StatusServiceUnavailable, "usage cannot be read now (try again): another usage read is still running")
		return
	}
	rctx, stop := whileClientStays(ctx.Conn())
	defer stop()
	if a.usageHook != nil {
		a.usageHook(rctx)
	}
	format := string(args.Peek("format"))
	var rep *UsageReport
	err := fmt.Errorf("%w: format must be json or csv (got %.32q)", ErrUsageQuery, format)
	if format == "" || format == "json" || format == "csv" {
		rep, err = a.UsageIn(rctx, UsageQuery{Tenant: string(args.Peek("tenant")), Period: string(args.Peek("period")),
			TimeZone: string(args.Peek("timezone"))})
	}
	if rctx.Err() != nil {
		// The caller left: nobody reads an answer, and the read stopped
		// (or will) without finishing. The next read gets the slot now.
		a.log.Debug("usage read stopped: its caller left")
		ctx.SetConnectionClose()
		return
	}
	if err == nil && format == "csv" {
		var buf bytes.Buffer
		if err = WriteUsageCSV(&buf, rep); err == nil {
			ctx.SetContentType("text/csv; charset=utf-8")
			ctx.Response.Header.Set("Content-Disposition", `attachment; filename="llmguard-usage-`+rep.Period.Name+`.csv"`)
			if rep.UnknownTenant {
				ctx.Response.Header.Set(UnknownTenantHeader, "true")
			}
			ctx.SetBody(buf.Bytes())
			return
		}
	}
	if err != nil {
		// A bad query is the caller's to fix (400); a ledger or store that
		// cannot be read is ours and may pass (503, as a proxy answers when
		// what it depends on is down).
		status, msg := fasthttp.StatusBadRequest, strings.TrimPrefix(err.Error(), ErrUsageQuery.Error()+": ")
		switch {
		case errors.Is(err, ErrUsageQuery):
		case transient(err):
			// err says what failed, once: "ledger: …" or "bucket: take
			// \"<key>\": store unavailable: …".
			status, msg = fasthttp.StatusServiceUnavailable, "usage cannot be read now (try again): "+err.Error()
			ctx.Response.Header.Set("Retry-After", "5")
		default:
			// A ledger file that cannot be read (permissions, a directory
			// where the file should be): retrying will not mend it.
			status, msg = fasthttp.StatusInternalServerError, "usage cannot be read (its operator must mend this): "+err.Error()
		}
		fail(status, msg)
		return
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	ctx.SetBody(b)
}

// clientGoneEvery is how often a usage read looks whether its caller left.
const clientGoneEvery = 250 * time.Millisecond

// whileClientStays returns a context cancelled once the client at the
// other end of conn is seen to have closed or reset it (looked at every
// clientGoneEvery, without reading what it sent), or once stop is called;
// call stop when done. fasthttp's RequestCtx is never cancelled, so a
// usage read, which scans the whole ledger one at a time, went on to the
// end for a caller that had hung up, and kept the others waiting (503
// after usageWait). On a platform or connection without a socket to look
// at, the context ends only with stop.
func whileClientStays(conn net.Conn) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	if conn == nil {
		return ctx, cancel
	}
	if _, ok := proxy.PeerClosed(conn); !ok {
		return ctx, cancel
	}
	go func() {
		t := time.NewTicker(clientGoneEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if closed, _ := proxy.PeerClosed(conn); closed {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// The 401 bodies of /admin/*: "error" stays "unauthorized" (what callers
// matched on before), "message" says what to send. With admin_token_env
// set every caller, loopback ones too, needs the token; without, only
// loopback callers are let through.
const (
	adminUnauthorizedToken    = `{"error":"unauthorized","message":"send the admin token (the value of the variable admin_token_env names) in the Authorization header: Authorization: Bearer <token>"}`
	adminUnauthorizedLoopback = `{"error":"unauthorized","message":"admin_token_env is not set, so /admin/* answers loopback callers only; call from the node itself, or set admin_token_env and send Authorization: Bearer <token>"}`
)

// adminGate lets an admin request through: with admin_token_env set, one
// whose Authorization header is "Bearer <the variable's value>" (compared
// in constant time); without, one from a loopback address. It answers any
// other request itself with 401, a Bearer challenge (RFC 6750 §3) and a
// JSON body saying what to send (adminUnauthorizedToken, or
// adminUnauthorizedLoopback without a token), and returns ok false. token is the variable's value ("" when unset).
func (a *App) adminGate(ctx *fasthttp.RequestCtx) (token string, ok bool) {
	if env := a.cfg.Load().AdminTokenEnv; env != "" {
		token = os.Getenv(env)
	}
	if !adminAllowed(ctx, token) {
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="llmguard-admin"`)
		ctx.SetContentType("application/json")
		if token != "" {
			ctx.SetBodyString(adminUnauthorizedToken)
		} else {
			ctx.SetBodyString(adminUnauthorizedLoopback)
		}
		return token, false
	}
	return token, true
}

func adminAllowed(ctx *fasthttp.RequestCtx, token string) bool {
	if token == "" {
		ip := net.IP(ctx.RemoteIP())
		return ip.IsLoopback()
	}
	got := string(ctx.Request.Header.Peek("Authorization"))
	return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+token)) == 1
}

// transient reports whether err may pass by itself: a network error or
// timeout (Redis down or slow), or the request's deadline.
func transient(err error) bool {
	var oe *net.OpError // a dial, read or write on a socket
	var ne net.Error    // fs.PathError satisfies it too: only its timeouts count
	return errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}
