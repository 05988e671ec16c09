// Package report builds the monthly spend report of one tenant from ledger
// records (`llmguard report`): spend per day, per model and per user, and
// the budget's burn-down over the month, rendered as one self-contained
// HTML page whose charts are inline SVG written by html/template — no
// script, no external asset (a Content-Security-Policy of default-src
// 'none' forbids any fetch), every text escaped.
package report

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmguard/llmguard/ledger"
)

// MaxRows is the most models or users a report lists one by one; the rest
// are added up in one "(N others)" row, so that a tenant with a million
// users gives a page of bounded size.
const MaxRows = 25

// ParseMonth parses a calendar month written YYYY-MM (e.g. 2026-11),
// years 1970 to 9999. Errors: any other text.
func ParseMonth(s string) (year int, month time.Month, err error) {
	bad := fmt.Errorf("report: month must be YYYY-MM, e.g. 2026-11 (got %.20q)", s)
	if len(s) != 7 || s[4] != '-' {
		return 0, 0, bad
	}
	for i, c := range []byte(s) {
		if i != 4 && (c < '0' || c > '9') {
			return 0, 0, bad
		}
	}
	y, _ := strconv.Atoi(s[:4])
	m, _ := strconv.Atoi(s[5:])
	if y < 1970 || m < 1 || m > 12 {
		return 0, 0, bad
	}
	return y, time.Month(m), nil
}

// Options select what Build reports.
type Options struct {
	Tenant string // required
	Year   int
	Month  time.Month
	// Location is the zone whose midnights bound the month and its days;
	// nil: UTC.
	Location *time.Location
	// BudgetMicroUSD is the tenant's budget for the month, in micro-USD;
	// 0: none (the burn-down then shows cumulative spend only).
	BudgetMicroUSD int64
	// BudgetName names the budget (the limit it came from), for the page.
	BudgetName string
	// Now marks how far into the month the data can go (the burn-down
	// stops there); zero: the month's end.
	Now time.Time
}

// Report is one tenant's month. Amounts are micro-USD; tokens are counts.
type Report struct {
	Tenant      string
	MonthLabel  string // e.g. "November 2026"
	Month       string // e.g. "2026-11"
	Start, End  time.Time
	TimeZone    string
	Budget      int64 // micro-USD; 0 when none
	BudgetName  string
	Total       Row
	Days        []Day
	Models      []Row
	Users       []Row
	GeneratedAt time.Time
}

// Row is a model's or a user's (or the whole tenant's) share of the month.
// Token counts are the ledger's: InputTokens includes CachedInputTokens and
// CacheWriteTokens, which are priced at their own rates (a model's
// cached_input_usd_per_mtok and cache_write_usd_per_mtok), so that input
// × the input price alone does not give the cost (trial24's finance check).
type Row struct {
	Name              string
	CostMicroUSD      int64
	Requests          int64
	Errors            int64
	InputTokens       int64
	CachedInputTokens int64
	CacheWriteTokens  int64
	OutputTokens      int64
}

// Day is one calendar day of the month in the report's zone.
type Day struct {
	Date time.Time // midnight, in the zone
	Row
	// Cumulative is the spend from the month's start to this day's end.
	Cumulative int64
	// Future marks a day after Options.Now: not drawn in the burn-down.
	Future bool
}

func (r *Row) add(rec ledger.Record) {
	var errs int64
	if rec.Status < 200 || rec.Status > 299 {
		errs = 1
	}
	r.merge(Row{CostMicroUSD: rec.CostMicroUSD, Requests: 1, Errors: errs, InputTokens: rec.InputTokens,
		CachedInputTokens: rec.CachedInputTokens, CacheWriteTokens: rec.CacheWriteTokens, OutputTokens: rec.OutputTokens})
}

// merge adds o's amounts to r's (saturating), keeping r's name: one place
// that knows every summed field, for a record and for a folded row alike.
func (r *Row) merge(o Row) {
	r.CostMicroUSD = ledger.AddSaturated(r.CostMicroUSD, o.CostMicroUSD)
	r.Requests += o.Requests
	r.Errors += o.Errors
	r.InputTokens = ledger.AddSaturated(r.InputTokens, o.InputTokens)
	r.CachedInputTokens = ledger.AddSaturated(r.CachedInputTokens, o.CachedInputTokens)
	r.CacheWriteTokens = ledger.AddSaturated(r.CacheWriteTokens, o.CacheWriteTokens)
	r.OutputTokens = ledger.AddSaturated(r.OutputTokens, o.OutputTokens)
}

// MaxNames bounds the distinct users a Builder keeps apart, MaxModels the
// distinct models (model names are the callers' own, as /admin/usage
// bounds them); records of further names are added up under
// ledger.OtherName, so that a hostile ledger cannot grow memory without
// bound.
const (
	MaxNames  = 100000
	MaxModels = 1000
)

// MaxNameBytes bounds a model or user name a Builder keeps, in bytes: 256,
// the longest model name the proxy accepts (a longer one is refused,
// proxy.maxModelName). A longer name, which llmguard never writes (a
// ledger line may hold 1 MiB, ledger.MaxLine), is cut at a UTF-8 boundary
// and marked with "…" (names alike in their first 256 bytes are added up
// together): without the cut, a ledger of 1 MiB names held up to 100,000 of
// them (100 GB) and put 25 of them, whole, on the page.
const MaxNameBytes = 256

// Builder adds up ledger records one at a time into a Report, so that a
// ledger of any length is read in bounded memory. Build it with
// NewBuilder; not safe for concurrent use.
type Builder struct {
	rep           *Report
	loc           *time.Location
	models, users map[string]*Row
}

// NewBuilder starts a report for o. Errors: no tenant, or a month out of
// range.
func NewBuilder(o Options) (*Builder, error) {
	if o.Tenant == "" {
		return nil, errors.New("report: a tenant is required")
	}
	if o.Year < 1970 || o.Year > 9999 || o.Month < 1 || o.Month > 12 {
		return nil, fmt.Errorf("report: month %d-%02d out of range", o.Year, o.Month)
	}
	loc := cmp.Or(o.Location, time.UTC)
	start := time.Date(o.Year, o.Month, 1, 0, 0, 0, 0, loc)
	end := start.AddDate(0, 1, 0)
	rep := &Report{Tenant: o.Tenant, MonthLabel: start.Format("January 2006"), Month: start.Format("2006-01"),
		Start: start, End: end, TimeZone: loc.String(), Budget: max(o.BudgetMicroUSD, 0), BudgetName: o.BudgetName,
		Total: Row{Name: o.Tenant}, GeneratedAt: time.Now().UTC()}
	for d := start; d.Before(end); d = d.AddDate(0, 0, 1) {
		rep.Days = append(rep.Days, Day{Date: d, Future: !o.Now.IsZero() && !d.Before(o.Now)})
	}
	return &Builder{rep: rep, loc: loc, models: map[string]*Row{}, users: map[string]*Row{}}, nil
}

// Add adds rec when it is the tenant's and in the month.
func (b *Builder) Add(rec ledger.Record) {
	rep := b.rep
	if rec.Tenant != rep.Tenant || rec.TS.Before(rep.Start) || !rec.TS.Before(rep.End) {
		return
	}
	rep.Total.add(rec)
	rep.Days[rec.TS.In(b.loc).Day()-1].add(rec)
	rowOf(b.models, rec.Model, MaxModels).add(rec)
	rowOf(b.users, rec.User, MaxNames).add(rec)
}

// Report finishes the report: cumulative spend per day, and the models
// and users sorted by spend (MaxRows of each at most).
func (b *Builder) Report() *Report {
	rep := b.rep
	var cum int64
	for i := range rep.Days {
		cum = ledger.AddSaturated(cum, rep.Days[i].CostMicroUSD)
		rep.Days[i].Cumulative = cum
	}
	rep.Models, rep.Users = top(b.models), top(b.users)
	return rep
}

// Build adds up the records of o.Tenant in the month (NewBuilder, Add,
// Report). Errors: as NewBuilder.
func Build(recs []ledger.Record, o Options) (*Report, error) {
	b, err := NewBuilder(o)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		b.Add(r)
	}
	return b.Report(), nil
}

// rowOf is name's row in m (at most limit names apart, each cut to
// MaxNameBytes), made when new.
func rowOf(m map[string]*Row, name string, limit int) *Row {
	if name == "" {
		name = ledger.NoName
	}
	name = cutName(name)
	if _, ok := m[name]; !ok && len(m) >= limit {
		name = ledger.OtherName
	}
	r := m[name]
	if r == nil {
		r = &Row{Name: name}
		m[name] = r
	}
	return r
}

// cutName is name cut to at most MaxNameBytes bytes, at a UTF-8 boundary,
// marked with "…" when cut.
func cutName(name string) string {
	if len(name) <= MaxNameBytes {
		return name
	}
	cut := MaxNameBytes - len("…")
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// top sorts rows by spend, then requests, then name, and folds those past
// MaxRows into one row.
func top(m map[string]*Row) []Row {
	rows := make([]Row, 0, len(m))
	for _, r := range m {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.CostMicroUSD, a.CostMicroUSD), cmp.Compare(b.Requests, a.Requests), strings.Compare(a.Name, b.Name))
	})
	if len(rows) > MaxRows {
		rest := Row{Name: fmt.Sprintf("(%d others)", len(rows)-MaxRows+1)}
		for _, r := range rows[MaxRows-1:] {
			rest.merge(r)
		}
		rows = append(rows[:MaxRows-1], rest)
	}
	return rows
}
