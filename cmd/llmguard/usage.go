package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/spec"
)

type usageCmd struct {
	// Config is optional, as for serve: without it the embedded default
	// is read, so that `llmguard usage` asks the `llmguard serve` started
	// without --config (admin 127.0.0.1:9090, no admin token).
	Config string `help:"YAML config file of the llmguard to ask (its admin_listen and admin_token_env). Default: the embedded default, which serve runs without --config." type:"path"`
	Tenant string `help:"Only this tenant."`
	// Period "" lets the node pick: the longest period of the budgets
	// that apply (a daily-only config reports today), else the month
	// (app.UsageQuery.Period).
	Period string `help:"Calendar period, from midnight in the budgets' time zone: day, week or month. Default: the longest period of the budgets that apply (today when they are all daily), the month when none does." enum:",day,week,month" default:"" placeholder:"day|week|month"`
	// TimeZone overrides the budgets' zone (UsageQuery.TimeZone).
	TimeZone  string `name:"timezone" help:"IANA time zone of the period (default: the zone of the tenant's budgets of that period, else of its other budgets, else UTC)."`
	Format    string `help:"Output: table, json (the endpoint's JSON as it is) or csv (one header row; README, \"Reports for finance\")." enum:"table,json,csv" default:"table"`
	JSON      bool   `name:"json" help:"Same as --format json."`
	Admin     string `help:"Admin address (host:port, or https://host:port) to ask instead of the config's admin_listen."`
	AnyConfig bool   `name:"any-config" help:"Answer even when the node serves another config than --config (by default the node refuses with 409: its numbers would be its own config's)."`
	AdminCA   string `name:"admin-ca" help:"PEM file of the CA that signed the admin listener's certificate (admin_tls), besides the system's roots and the config's admin_tls cert_file." type:"path"`
	Unknown   bool   `name:"allow-unknown-tenant" help:"Print the empty report of a --tenant that no key (config or key store) and no ledger record names, with a note, instead of failing (exit 2)."`
}

// Run asks GET /admin/usage of the llmguard the config describes (the
// embedded default without --config) and prints a table, the JSON
// (--format json) or CSV (--format csv).
func (u *usageCmd) Run() error {
	if u.JSON {
		u.Format = "json"
	}
	if u.TimeZone != "" {
		// Refused here, as report refuses it (exit 2), rather than sent to
		// the node and answered 400 (exit 1, as if the node had failed).
		// Both binaries carry the same zones (time/tzdata, config).
		if _, err := time.LoadLocation(u.TimeZone); err != nil {
			return usageError{fmt.Errorf("usage: unknown --timezone %q (want an IANA name such as Europe/Paris)", u.TimeZone)}
		}
	}
	cfg, err := loadConfig(u.Config)
	if err != nil {
		printConfigError(os.Stderr, cmp.Or(u.Config, "embedded default config"), err)
		os.Exit(1)
	}
	target, err := newAdminTarget(cfg, u.Admin, u.AdminCA)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	q := url.Values{}
	if u.Period != "" {
		q.Set("period", u.Period)
	}
	if !u.AnyConfig {
		// The node refuses (409) when it serves another config: its
		// numbers would be another ledger's, tenants' and zones'.
		q.Set("config_sha256", cfg.Fingerprint())
	}
	if u.Tenant != "" {
		q.Set("tenant", u.Tenant)
	}
	if u.TimeZone != "" {
		q.Set("timezone", u.TimeZone)
	}
	if u.Format == "csv" {
		q.Set("format", "csv")
	}
	body, header, err := target.doHeader("usage", http.MethodGet, "/admin/usage?"+q.Encode(), nil, cfg.AdminTokenEnv, nil)
	if err != nil {
		return err
	}
	// A tenant the node knows nothing of (likely misspelt) fails, as
	// `llmguard report` does, in every format: its empty report read as a
	// quiet period. The node says so in the JSON's unknown_tenant, and in
	// a header of a CSV answer.
	var rep app.UsageReport
	unknown := header.Get(app.UnknownTenantHeader) == "true"
	if u.Format != "csv" {
		if err := json.Unmarshal(body, &rep); err != nil && u.Format != "json" {
			return fmt.Errorf("usage: %w", err)
		}
		unknown = rep.UnknownTenant
	}
	if unknown && u.Tenant != "" {
		if !u.Unknown {
			return usageError{errors.New("usage: " + unknownTenantNote(u.Tenant, &rep) + "; --allow-unknown-tenant prints its empty report")}
		}
		if u.Format != "table" {
			fmt.Fprintln(os.Stderr, "llmguard usage: "+unknownTenantNote(u.Tenant, &rep))
		}
	}
	switch u.Format {
	case "json":
		_, err = os.Stdout.Write(append(body, '\n'))
		return err
	case "csv":
		_, err = os.Stdout.Write(body)
		return err
	}
	printReport(os.Stdout, &rep)
	if rep.UnreadableLines > 0 {
		fmt.Fprintf(os.Stderr, "llmguard usage: skipped %d unreadable ledger %s: the spend above is short by theirs\n", rep.UnreadableLines,
			plural(rep.UnreadableLines, "line", "lines"))
	}
	if note := emptyTenantNote(u.Tenant, &rep); note != "" {
		fmt.Fprintln(os.Stderr, note)
	}
	for _, note := range quotaBehindLedgerNotes(&rep) {
		fmt.Fprintln(os.Stderr, note)
	}
	for _, note := range nodeFileNotes(&rep, cfg) {
		fmt.Fprintln(os.Stderr, note)
	}
	return nil
}

// quotaBehindLedgerNotes are the lines usage writes to stderr for each
// tenant dollar quota (scope tenant, unit micro_usd, not per model) whose
// period is the report's and whose store-counted used is below the
// ledger's spend of that tenant over it: the store did not count some of
// what was spent. Its usual causes are named, since the two numbers sit
// in separate tables and units (trial3: a Redis restarted without its data
// read 55 used beside 105 µUSD spent, and nothing said why; trial16: a node
// on the memory store, restarted, read 0 beside 496 µUSD, and the note named
// only Redis).
func quotaBehindLedgerNotes(rep *app.UsageReport) []string {
	if rep.Source == "none" {
		return nil
	}
	var notes []string
	for _, q := range rep.Quotas {
		if q.Scope != spec.ScopeTenant.String() || q.Unit != spec.MicroUSD || q.Model != "" ||
			!q.PeriodStart.Equal(rep.Period.Start) || !q.PeriodEnd.Equal(rep.Period.End) {
			continue
		}
		i := slices.IndexFunc(rep.ByTenant, func(r app.UsageRow) bool { return r.Tenant == q.Subject })
		if i < 0 || rep.ByTenant[i].Spend.MicroUSD <= q.Used {
			continue
		}
		notes = append(notes, fmt.Sprintf("llmguard usage: quota %s of tenant %q counts %d µUSD used, less than the %d µUSD the ledger holds for the tenant over the same period: "+
			"the store lost usage (the in-memory store starts empty at every restart of the node, as does a Redis restarted without its data), the quota was added or renamed during the period, the fail-open fallback served requests while the store was down and its charge-back is still held or was dropped (llmguard_fallback_charges_held, llmguard_fallback_charges_dropped_total), "+
			"or settlements are still in flight; the ledger is the record of spend, the quota what the proxy enforces",
			q.Limit, cell(q.Subject), q.Used, rep.ByTenant[i].Spend.MicroUSD))
	}
	return notes
}

// nodeFileNotes are the lines usage writes to stderr when its spend came
// from one node's ledger file of several: a tenant dollar quota counting
// more than the file holds (quotaAheadOfNodeFileNotes), else, with no
// such quota to compare, a config whose store.nodes is above one
// (oneNodeFileNote).
func nodeFileNotes(rep *app.UsageReport, cfg *config.Config) []string {
	if ahead := quotaAheadOfNodeFileNotes(rep, cfg.Store.Kind()); len(ahead) > 0 {
		return ahead
	}
	if note := oneNodeFileNote(cfg, nil); note != "" && rep.Source == "file" {
		return []string{"llmguard usage: " + note}
	}
	return nil
}

// quotaAheadOfNodeFileNotes are the lines usage writes to stderr, when
// the spend was read from a ledger file and the store is shared (Redis),
// for each tenant dollar quota of the report's period whose store-counted
// used is above the file's spend of its tenant: every node takes from the
// quota, but a ledger file holds its own node's requests only. Trial25's
// finance check of two nodes read $0.008315 for a tenant beside a quota
// that counted 16,600 µUSD, the whole of both nodes' spend, with nothing
// said; the README says it, in the Redis store's section.
func quotaAheadOfNodeFileNotes(rep *app.UsageReport, store spec.Backend) []string {
	if rep.Source != "file" || store == spec.BackendMemory {
		return nil
	}
	var notes []string
	for _, q := range rep.Quotas {
		if q.Scope != spec.ScopeTenant.String() || q.Unit != spec.MicroUSD || q.Model != "" ||
			!q.PeriodStart.Equal(rep.Period.Start) || !q.PeriodEnd.Equal(rep.Period.End) {
			continue
		}
		var spent int64
		if i := slices.IndexFunc(rep.ByTenant, func(r app.UsageRow) bool { return r.Tenant == q.Subject }); i >= 0 {
			spent = rep.ByTenant[i].Spend.MicroUSD
		}
		if q.Used <= spent {
			continue
		}
		notes = append(notes, fmt.Sprintf("llmguard usage: quota %s of tenant %q counts %d µUSD used, more than the %d µUSD this node's ledger file holds for the tenant over the same period: "+
			"every node sharing the store takes from the quota, but each writes its own ledger.file, so the spend above is this node's alone "+
			"(add up every node's file with `llmguard report --tenant %s --ledger a.jsonl --ledger b.jsonl`, or set ledger.redis_stream, which every node writes and usage reads whole); "+
			"requests still in flight also count in the quota until they settle",
			q.Limit, cell(q.Subject), q.Used, spent, cell(q.Subject)))
	}
	return notes
}

// unknownTenantNote is why a report of tenant is refused as likely
// misspelt (app.UsageReport.UnknownTenant): the node's note, or for a CSV
// answer, which carries none, the same words.
func unknownTenantNote(tenant string, rep *app.UsageReport) string {
	if rep.Note != "" {
		return rep.Note
	}
	return fmt.Sprintf("no keys or records for tenant %q in this period: check its spelling (`llmguard usage` without --tenant lists every tenant with spend)", tenant)
}

// emptyTenantNote is the line usage writes to stderr under the report of a
// --tenant with no request in the period and nothing used of any quota (an
// empty report for a misspelt tenant looked like a quiet period), or "" for
// any other report. With no ledger configured (rep.Source "none") requests
// are not counted at all, so the note says so rather than blame the
// spelling of a tenant that may well be sending requests. The node's own
// note (rep.Note), which knows whether any key names the tenant, is used
// when it gave one (trial4: a tenant with keys whose calls were all refused
// was told to check its spelling); the generic line is for a node that
// gives none.
func emptyTenantNote(tenant string, rep *app.UsageReport) string {
	if tenant == "" || rep.Requests != 0 || slices.ContainsFunc(rep.Quotas, func(q app.QuotaState) bool { return q.Used != 0 }) {
		return ""
	}
	if rep.Note != "" {
		return "llmguard usage: " + rep.Note
	}
	if rep.Source == "none" {
		return fmt.Sprintf("llmguard usage: tenant %q has nothing used of any quota, and this llmguard keeps no ledger (its config has no ledger: section), so its requests are not counted: check the tenant's spelling, or add a ledger to see spend", tenant)
	}
	return fmt.Sprintf("llmguard usage: tenant %q has no request in this period and nothing used of any quota: check its spelling (`llmguard usage` without --tenant lists every tenant with spend)", tenant)
}

func printReport(out io.Writer, r *app.UsageReport) {
	who := "all tenants"
	if r.Tenant != "" {
		who = "tenant " + r.Tenant
	}
	// Source is "file", "redis_stream" or "none" (no ledger configured:
	// nothing records spend, and only the quotas are read).
	source := "from the ledger " + r.Source
	if r.Source == "none" {
		source = "no ledger configured (spend is not recorded: add ledger: {file: ledger.jsonl} to the config to record it; quotas are read from the store)"
	}
	fmt.Fprintf(out, "%s, %s %s – %s (%s), %s\n", who, r.Period.Name,
		r.Period.Start.Format(time.RFC3339), r.Period.End.Format(time.RFC3339), cmp.Or(r.Period.TimeZone, "UTC"), source)
	// A period the caller did not name says why it is this one and how to
	// pick another: finance asking a daily-only config was shown a month.
	switch r.Period.Chosen {
	case "budgets":
		fmt.Fprintf(out, "(the %s: the longest period of the budgets that apply; --period day, week or month picks another)\n", r.Period.Name)
	case "default":
		fmt.Fprintf(out, "(the %s: no budget applies; --period day, week or month picks another)\n", r.Period.Name)
	}
	fmt.Fprintf(out, "spend $%.6f (%d µUSD) over %d %s; burn rate $%.6f/day\n\n",
		r.Spend.USD, r.Spend.MicroUSD, r.Requests, plural(r.Requests, "request", "requests"), r.BurnRateUSDPerDay)
	// One tabwriter per table: columns align within a table, not across.
	table := func(title string, rows []app.UsageRow, name func(app.UsageRow) string) {
		if len(rows) == 0 {
			return
		}
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		// The input's cached and cache-write parts are priced at their
		// own rates: without them, input × the input price did not give
		// a Claude row's spend (trial24).
		fmt.Fprintf(w, "%s\tspend USD\tmicro-USD\trequests\terrors\tinput tokens\tof which cached\tcache writes\toutput tokens\n", title)
		for _, x := range rows {
			fmt.Fprintf(w, "%s\t%.6f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name(x), x.Spend.USD, x.Spend.MicroUSD, x.Requests, x.Errors,
				x.Tokens.Input, x.Tokens.CachedInput, x.Tokens.CacheWrite, x.Tokens.Output)
		}
		w.Flush()
		fmt.Fprintln(out)
	}
	table("tenant", r.ByTenant, func(x app.UsageRow) string { return cell(x.Tenant) })
	table("user", r.ByUser, func(x app.UsageRow) string { return cell(x.Tenant) + "/" + cell(x.User) })
	table("model", r.ByModel, func(x app.UsageRow) string { return modelCell(x.Model) })
	if len(r.Quotas) > 0 {
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		defer w.Flush()
		fmt.Fprintf(w, "quota\tsubject\tunit\tused\tquota\tremaining\tused %%\tperiod end\trate since\tdays left\n")
		for _, q := range r.Quotas {
			days := "-"
			var notes []string
			if q.DaysLeft >= 0 {
				days = fmt.Sprintf("%.1f", q.DaysLeft)
				if q.DaysLeft < 1 {
					// Under a day, "0.0" hid whether 11 minutes or 2
					// hours were left (trial17): hours and minutes too.
					notes = append(notes, hoursMinutes(q.DaysLeft))
				}
			}
			if q.LastsPeriod {
				// The quota outlasts its period at this rate: the days
				// are those until it resets.
				notes = append(notes, "lasts the period")
			}
			if len(notes) > 0 {
				days += " (" + strings.Join(notes, ", ") + ")"
			}
			fmt.Fprintf(w, "%s\t%s %s\t%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\n", q.Limit, q.Scope, cell(q.Subject), q.Unit, q.Used, q.Quota,
				q.Remaining, 100*q.UsedFraction, q.PeriodEnd.Format(time.RFC3339), rateSince(q), days)
		}
	}
}

// rateSince says which span a quota's days left is measured over
// (app.QuotaState.RateFrom and RateBasis): "2026-12-07T20:03:00Z (limit
// added)"; "-" for an answer without it (an older node's).
func rateSince(q app.QuotaState) string {
	if q.RateFrom.IsZero() {
		return "-"
	}
	why := map[string]string{app.RatePeriod: "period start", app.RateLimitAdded: "limit added",
		app.RateFirstRecord: "first request", app.RateMinSpan: "last hour"}[q.RateBasis]
	return q.RateFrom.Format(time.RFC3339) + " (" + cmp.Or(why, cell(q.RateBasis)) + ")"
}

// hoursMinutes is days (under 1) as whole hours and minutes, "7h05m" or
// "11m", rounded to the minute.
func hoursMinutes(days float64) string {
	m := int(math.Round(days * 24 * 60))
	if m < 60 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}

// modelCell is a model name as the model table prints it: cell(model), or
// ledger.NoName for the requests that name no model (GET /v1/models,
// a multipart upload, a body that is not JSON…), as `llmguard report` labels
// them: an empty first column read as a row without a name.
func modelCell(model string) string {
	if model == "" {
		return ledger.NoName
	}
	return cell(model)
}

// cell is text from the ledger or the store as a table prints it: as it
// is, or quoted as a Go string (\n, \x1b…) when it holds a control
// character or a tab. A model name is the caller's choice, and one holding
// a newline or an escape sequence must not add rows to the table or drive
// the operator's terminal.
func cell(s string) string {
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}
