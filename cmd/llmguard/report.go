package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/report"
	"github.com/llmguard/llmguard/internal/respguard"
	"github.com/llmguard/llmguard/internal/suggest"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/spec"
)

// reportCmd is `llmguard report`: one tenant's month as a self-contained
// HTML page on stdout, read straight from the ledger (no running node is
// needed): the file of --ledger, or the ledger the --config file names
// (its file and rotated backups, else its Redis stream). README, "Reports
// for finance".
type reportCmd struct {
	Tenant   string   `help:"Tenant to report on." required:""`
	Month    string   `help:"Calendar month, YYYY-MM (e.g. 2026-11); default the current month in the report's time zone."`
	Ledger   []string `help:"Ledger file to read (JSON lines; its rotated backups beside it are read too). Repeat it for a fleet's files, one per node: their records are added up." type:"path" xor:"source" sep:"none"`
	Config   string   `help:"llmguard config whose ledger (ledger.file, else ledger.redis_stream) is read, and whose monthly USD quota of the tenant is the budget." type:"path" xor:"source"`
	TimeZone string   `name:"timezone" help:"IANA time zone of the month and its days (default: the budget's timezone, else UTC)."`
	Budget   float64  `name:"budget-usd" help:"The month's budget in US dollars for the burn-down (default: the tenant's monthly usd quota in --config; none without)."`
	Unknown  bool     `name:"allow-unknown-tenant" help:"Write the empty page for a tenant no ledger record (nor the --config) names, with a warning, instead of failing."`
}

// Run writes the report to stdout. Errors: no source, a bad month or zone,
// an unreadable ledger; a tenant that no record read names, in any month
// (the month's, read from the ledger stream), nor the config's keys,
// identity or limits (a usageError naming the closest tenant known and
// the tenants seen, unless --allow-unknown-tenant: a misspelt tenant's
// empty page read as a month without spend).
func (r *reportCmd) Run() error {
	opt := report.Options{Tenant: r.Tenant, Now: time.Now()}
	var err error
	var cfg *config.Config
	if r.Config != "" {
		if cfg, err = config.Load(r.Config); err != nil {
			printConfigError(os.Stderr, r.Config, err)
			os.Exit(1)
		}
		if l := monthlyBudget(cfg, r.Tenant); l != nil {
			opt.BudgetMicroUSD, opt.BudgetName = int64(math.Floor(l.Quota*1e6)), l.Name
			opt.Location, _ = time.LoadLocation(l.Timezone)
		}
	}
	if !(r.Budget >= 0 && r.Budget <= 1e12) { // NaN too: it compared false and drew no budget (adv48)
		return usageError{fmt.Errorf("report: --budget-usd must be between 0 and 1e12 (got %v)", r.Budget)}
	}
	if r.Budget > 0 {
		opt.BudgetMicroUSD, opt.BudgetName = int64(math.Floor(r.Budget*1e6)), ""
	}
	if r.TimeZone != "" {
		if opt.Location, err = time.LoadLocation(r.TimeZone); err != nil {
			return usageError{fmt.Errorf("report: unknown --timezone %q (want an IANA name such as Europe/Paris)", r.TimeZone)}
		}
	}
	if r.Month == "" {
		// As usage does: the period now runs, in the report's zone.
		loc := opt.Location
		if loc == nil {
			loc = time.UTC
		}
		now := opt.Now.In(loc)
		opt.Year, opt.Month = now.Year(), now.Month()
	} else if opt.Year, opt.Month, err = report.ParseMonth(r.Month); err != nil {
		return usageError{err}
	}
	b, err := report.NewBuilder(opt)
	if err != nil {
		return err
	}
	seen := tenantsSeen{want: r.Tenant}
	monthOnly, err := r.read(cfg, opt, func(rec ledger.Record) { seen.add(rec); b.Add(rec) })
	if err != nil {
		return err
	}
	rep := b.Report()
	if !seen.found && !r.Unknown && !configNames(cfg, r.Tenant) {
		return usageError{seen.unknownError(rep, monthOnly, cfg != nil)}
	}
	if msg := seen.emptyNote(rep, monthOnly); msg != "" {
		fmt.Fprintln(os.Stderr, "llmguard report: "+msg)
	}
	if msg := oneNodeFileNote(cfg, r.Ledger); msg != "" {
		fmt.Fprintln(os.Stderr, "llmguard report: "+msg)
	}
	w := bufio.NewWriter(os.Stdout)
	if err := report.Render(w, rep); err != nil {
		return err
	}
	return w.Flush()
}

// oneNodeFileNote is the note report (and usage) writes to stderr when it read the
// config's ledger.file alone (no --ledger) of a config whose store.nodes
// says several nodes share the store: each node writes its own file, so
// the page shows one node's spend (trial25: $0.008315 of a tenant's
// $0.016600 over two nodes). "" otherwise.
func oneNodeFileNote(cfg *config.Config, ledgers []string) string {
	if cfg == nil || len(ledgers) > 0 || cfg.Ledger.File == "" || cfg.Store.Nodes < 2 {
		return ""
	}
	return fmt.Sprintf("read the one ledger.file %s of a config with store.nodes: %d: each node writes its own file, so the spend shown is this node's alone; "+
		"`llmguard report --ledger a.jsonl --ledger b.jsonl` adds every node's file up, or use ledger.redis_stream, which every node writes",
		cfg.Ledger.File, cfg.Store.Nodes)
}

// read passes fn the ledger's records: of --ledger, or of the config's
// ledger file (each file streamed, never held whole), else of its stream
// (the month's entries, XRANGE; the stream is bounded by its maxlen).
// monthOnly is true when what it read was the stream: the month's records
// only, not every record of the ledger.
func (r *reportCmd) read(cfg *config.Config, opt report.Options, fn func(ledger.Record)) (monthOnly bool, err error) {
	ledgers := r.Ledger
	if len(ledgers) == 0 && cfg != nil && cfg.Ledger.File != "" {
		ledgers = []string{cfg.Ledger.File}
	}
	switch {
	case len(ledgers) > 0:
		var files []string
		for _, file := range ledgers {
			names, err := ledger.Files(file)
			if errors.Is(err, fs.ErrNotExist) && len(r.Ledger) == 0 && !filepath.IsAbs(file) {
				// ledger.file is relative to serve's working directory, which
				// need not be this one.
				return false, fmt.Errorf("%w (ledger.file is relative to the working directory llmguard serve runs in: run report there, or give --ledger PATH)", err)
			}
			if err != nil {
				return false, err
			}
			for _, name := range names {
				if i := slices.IndexFunc(files, func(f string) bool { return sameFile(f, name) }); i >= 0 {
					return false, fmt.Errorf("report: --ledger reads %s twice (as %s too, by another name, a link or as a backup of another file): its records would count twice", name, files[i])
				}
				files = append(files, name)
			}
		}
		bad := 0
		for _, name := range files {
			n, err := ledger.ReadFile(name, fn)
			if err != nil {
				return false, err
			}
			bad += n
		}
		if bad > 0 {
			fmt.Fprintf(os.Stderr, "llmguard report: skipped %d unreadable ledger %s\n", bad, plural(bad, "line", "lines"))
		}
		return false, nil
	case cfg != nil && cfg.Ledger.RedisStream != "":
		o, err := redis.ParseURL(cfg.Ledger.RedisURL)
		if err != nil {
			return false, fmt.Errorf("report: ledger.redis_url: %w", err)
		}
		o.ContextTimeoutEnabled = true // ScanStream bounds each page by its context
		// go-redis logs each failed dial through its package logger, to
		// stderr: "redis: 2026/12/05 … pool.go:…: failed to dial after 5
		// attempts", once per try, above report's own error (trial8). Its
		// lines go to slog at debug, as serve sends them, which report
		// does not print; the error that ends the read says the same once.
		redis.SetLogger(redisLogger{slog.New(slog.NewTextHandler(os.Stderr, nil))})
		rc := respguard.NewClient(o)
		defer rc.Close()
		loc := opt.Location
		if loc == nil {
			loc = time.UTC
		}
		from := time.Date(opt.Year, opt.Month, 1, 0, 0, 0, 0, loc)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		bad, err := ledger.ScanStream(ctx, rc, cfg.Ledger.RedisStream, from, from.AddDate(0, 1, 0), fn)
		if bad > 0 {
			fmt.Fprintf(os.Stderr, "llmguard report: skipped %d unreadable ledger stream %s\n", bad, plural(bad, "entry", "entries"))
		}
		return true, err
	case cfg != nil:
		return false, errors.New("report: the config names no ledger (ledger.file or ledger.redis_stream): add ledger: {file: ledger.jsonl} to it to record spend from then on")
	}
	// A missing argument: exit 2, as the main package's doc says (trial2:
	// it exited 1, as a failed report does).
	// Unlike usage, report reads no running node: the embedded default
	// records no ledger, so there is no default to fall back to (trial10:
	// `llmguard report --tenant dev-team` after the Quickstart).
	return false, usageError{errors.New("report: give --ledger FILE or --config FILE (a config with a ledger: section; the embedded default records no ledger)")}
}

// monthlyBudget is the first limit of cfg that is a monthly USD quota of
// scope tenant applying to tenant (its tenants: list names it, or it has
// none); nil when there is none.
func monthlyBudget(cfg *config.Config, tenant string) *config.Limit {
	for i := range cfg.Limits {
		l := &cfg.Limits[i]
		if l.Scope == spec.ScopeTenant.String() && l.Unit == spec.UnitUSD.String() && l.Quota > 0 && l.Period == spec.PeriodMonth.String() && !l.Shadow &&
			(len(l.Tenants) == 0 || slices.Contains(l.Tenants, tenant)) {
			return l
		}
	}
	return nil
}

// tenantsSeen notes, over the records a report reads, whether tenant want
// has any (in any month) and the first few other tenants, for the warning
// that a tenant named on the command line is absent from the ledger.
type tenantsSeen struct {
	want        string
	found       bool
	first, last time.Time // of want's records, when found
	other       []string  // at most 10, in the order first seen
}

func (s *tenantsSeen) add(rec ledger.Record) {
	switch {
	case rec.Tenant == s.want:
		if !s.found || rec.TS.Before(s.first) {
			s.first = rec.TS
		}
		if !s.found || rec.TS.After(s.last) {
			s.last = rec.TS
		}
		s.found = true
	case len(s.other) < 10 && !slices.Contains(s.other, rec.Tenant):
		s.other = append(s.other, rec.Tenant)
	}
}

// configNames reports whether cfg (nil: none) names tenant: a key's
// tenant, the pass-through callers' tenant, or one a limit lists.
func configNames(cfg *config.Config, tenant string) bool {
	if cfg == nil {
		return false
	}
	if slices.ContainsFunc(cfg.Keys, func(k config.Key) bool { return k.Tenant == tenant }) ||
		cfg.Identity.PassThrough && cmp.Or(cfg.Identity.Tenant, "pass-through") == tenant {
		return true
	}
	return slices.ContainsFunc(cfg.Limits, func(l config.Limit) bool { return slices.Contains(l.Tenants, tenant) })
}

// unknownError is the error of a report for a tenant that neither the
// records read nor the config (withConfig: one was given) name: which
// tenant the name most likely stands for (suggest.Closest) and the
// tenants seen, and the flag that writes the empty page anyway.
func (s *tenantsSeen) unknownError(rep *report.Report, monthOnly, withConfig bool) error {
	where := "the ledger has no record of tenant %q in any month"
	if monthOnly {
		where = "the ledger stream has no record of tenant %q in " + rep.Month
	}
	if withConfig {
		where += " and the config names no such tenant"
	}
	msg := fmt.Sprintf("report: "+where, s.want)
	if c := suggest.Closest(s.want, s.other); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	msg += s.others()
	return errors.New(msg + "; --allow-unknown-tenant writes its empty page")
}

// emptyNote is the warning for a report with no record of its tenant in
// its month, "" when it has some. An empty page for a misspelt tenant
// looked like a quiet month, and one for a month before the tenant's
// first record (or after its last) like a month of no spend (trial8):
// the note says which, and where the tenant's records are. monthOnly
// says the records read were only the month's (the ledger stream), so
// that an absent tenant is absent from the month, not from the ledger.
func (s *tenantsSeen) emptyNote(rep *report.Report, monthOnly bool) string {
	switch {
	case rep.Total.Requests > 0:
		return ""
	case !s.found && monthOnly:
		return fmt.Sprintf("the ledger stream has no record of tenant %q in %s%s; the report is empty",
			s.want, rep.Month, s.others())
	case !s.found:
		return fmt.Sprintf("the ledger has no record of tenant %q in any month%s; the report is empty", s.want, s.others())
	}
	loc := rep.Start.Location()
	return fmt.Sprintf("the ledger has no record of tenant %q in %s (%s); its records run from %s to %s; the report is empty",
		s.want, rep.Month, rep.TimeZone, s.first.In(loc).Format(time.DateOnly), s.last.In(loc).Format(time.DateOnly))
}

// others is ", tenants in it: a, b" (with "…" when there may be more), or
// "" when the ledger names no other tenant.
func (s *tenantsSeen) others() string {
	if len(s.other) == 0 {
		return ""
	}
	more := ""
	if len(s.other) == 10 {
		more = ", …"
	}
	return fmt.Sprintf(" (tenants in it: %s%s)", strings.Join(s.other, ", "), more)
}

// plural is one when n is 1, else many.
func plural[N int | int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sameFile reports whether a and b name one file (one path, or a link to
// it); false when either cannot be read.
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
