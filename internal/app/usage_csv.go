package app

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// UsageCSVHeader are the columns of WriteUsageCSV, in order (README,
// "Reports for finance", documents each):
//
//	row               total, tenant, user, model or quota
//	tenant, user, model
//	                  the row's tenant, user and model ("" where they do not apply)
//	limit, scope, subject, unit
//	                  a quota row's limit, its scope (key, user, tenant,
//	                  global), whose bucket it is, and its unit (micro_usd,
//	                  tokens, input_tokens, output_tokens, requests)
//	period_start, period_end
//	                  RFC 3339 with the zone's offset: the report's period
//	                  for spend rows, the quota's own period for quota rows
//	timezone          the IANA zone of period_start and period_end
//	spend_micro_usd   the ledger's spend in millionths of a US dollar
//	                  (exact); "" in quota rows
//	spend_usd         the same in dollars, 6 decimals; "" in quota rows
//	requests, errors  request counts (errors: status not 2xx); "" in
//	                  quota rows, as are the token columns
//	input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens
//	                  tokens (input includes cached and cache writes;
//	                  output includes reasoning)
//	quota, used, remaining
//	                  a quota row's amounts, in its unit, read from the
//	                  store (a dollar quota's used is in micro-USD and
//	                  may differ from the ledger's spend: a store that
//	                  lost its data restarts it at 0); "" in spend rows
//	used_fraction     used / quota, 4 decimals
//	days_left         remaining at the burn rate observed from rate_from
//	                  on, in days, capped at the days until the period
//	                  ends (1 decimal); "" when nothing was used yet
//	rate_from         start of the span days_left's rate is measured
//	                  over (RFC 3339); "" in spend rows
//	rate_basis        why it starts there: period, limit_added,
//	                  first_record or min_span (QuotaState.RateBasis)
var UsageCSVHeader = []string{"row", "tenant", "user", "model", "limit", "scope", "subject", "unit",
	"period_start", "period_end", "timezone", "spend_micro_usd", "spend_usd", "requests", "errors",
	"input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
	"quota", "used", "remaining", "used_fraction", "days_left", "rate_from", "rate_basis"}

// WriteUsageCSV writes r as CSV (RFC 4180, encoding/csv): the header
// UsageCSVHeader, one "total" row, then a row per tenant, user and model
// (as the text table lists them) and per quota. Text cells that a
// spreadsheet would read as a formula (starting with =, +, -, @, tab or
// CR) are prefixed with ' (OWASP, "CSV Injection"). Errors: w's.
func WriteUsageCSV(w io.Writer, r *UsageReport) error {
	cw := csv.NewWriter(w)
	cw.Write(UsageCSVHeader)
	start, end := r.Period.Start.Format(time.RFC3339), r.Period.End.Format(time.RFC3339)
	spendRow := func(kind string, x UsageRow) []string {
		return []string{kind, cell(x.Tenant), cell(x.User), cell(x.Model), "", "", "", "",
			start, end, r.Period.TimeZone, strconv.FormatInt(x.Spend.MicroUSD, 10), usd(x.Spend.MicroUSD),
			itoa(x.Requests), itoa(x.Errors), itoa(x.Tokens.Input), itoa(x.Tokens.CachedInput), itoa(x.Tokens.CacheWrite),
			itoa(x.Tokens.Output), itoa(x.Tokens.Reasoning), "", "", "", "", "", "", ""}
	}
	total := UsageRow{Tenant: r.Tenant, Spend: r.Spend, Requests: r.Requests, Tokens: r.Tokens}
	for _, x := range r.ByTenant {
		total.Errors += x.Errors
	}
	cw.Write(spendRow("total", total))
	for _, x := range r.ByTenant {
		cw.Write(spendRow("tenant", x))
	}
	for _, x := range r.ByUser {
		cw.Write(spendRow("user", x))
	}
	for _, x := range r.ByModel {
		cw.Write(spendRow("model", x))
	}
	for _, q := range r.Quotas {
		days := ""
		if q.DaysLeft >= 0 {
			days = strconv.FormatFloat(q.DaysLeft, 'f', 1, 64)
		}
		cw.Write([]string{"quota", cell(q.Tenant), "", cell(q.Model), cell(q.Limit), q.Scope, cell(q.Subject), q.Unit,
			q.PeriodStart.Format(time.RFC3339), q.PeriodEnd.Format(time.RFC3339), q.PeriodStart.Location().String(),
			"", "", "", "", "", "", "", "", "",
			itoa(q.Quota), itoa(q.Used), itoa(q.Remaining), strconv.FormatFloat(q.UsedFraction, 'f', 4, 64), days,
			rateFrom(q), q.RateBasis})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("usage csv: %w", err)
	}
	return nil
}

// rateFrom is q.RateFrom in RFC 3339, "" when unset.
func rateFrom(q QuotaState) string {
	if q.RateFrom.IsZero() {
		return ""
	}
	return q.RateFrom.Format(time.RFC3339)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// usd formats micro-USD as dollars with 6 decimals, exactly (no float).
func usd(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	return fmt.Sprintf("%s%d.%06d", sign, micro/1_000_000, micro%1_000_000)
}

// cell neutralises a text cell a spreadsheet would evaluate as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
