package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/ledger"
)

// `llmguard report` writes the tenant's month as HTML from the ledger the
// config names, with the config's monthly USD quota as the budget in its
// zone; --ledger reads a file directly; a bad month is refused.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.jsonl")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for day := 1; day <= 10; day++ {
		enc.Encode(ledger.Record{TS: time.Date(2026, 11, day, 12, 0, 0, 0, time.UTC), Tenant: "acme", User: "alice",
			Model: "gpt-4o-mini", Status: 200, CostMicroUSD: 1_000_000})
	}
	enc.Encode(ledger.Record{TS: time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC), Tenant: "globex", User: "hank", Model: "o3", Status: 200, CostMicroUSD: 5})
	f.Close()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
limits: [{name: acme-monthly, scope: tenant, unit: usd, quota: 25, period: month, timezone: Europe/Paris}]
ledger: {file: %q}
`, file)), 0o644)
	bin := binary(t)
	out, err := exec.Command(bin, "report", "--config", cfg, "--tenant", "acme", "--month", "2026-11").Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	page := string(out)
	for _, want := range []string{"<!DOCTYPE html>", "acme — November 2026", "Europe/Paris", "$10.00", "$25.00", "acme-monthly",
		"gpt-4o-mini", "alice", `<svg id="burn"`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "globex") || strings.Contains(page, "hank") {
		t.Error("report shows another tenant's records")
	}
	out, err = exec.Command(bin, "report", "--ledger", file, "--tenant", "acme", "--month", "2026-11", "--budget-usd", "12").Output()
	if err != nil || !strings.Contains(string(out), "$12.00") || !strings.Contains(string(out), "(UTC)") {
		t.Errorf("report --ledger: %v", err)
	}
	if err := exec.Command(bin, "report", "--ledger", file, "--tenant", "acme", "--month", "2026-13").Run(); err == nil {
		t.Error("--month 2026-13 accepted")
	}
	// Neither --ledger nor --config is a usage error: exit 2 (it was 1).
	var exit *exec.ExitError
	noArgs := exec.Command(bin, "report", "--tenant", "acme")
	var noArgsErr strings.Builder
	noArgs.Stderr = &noArgsErr
	if err := noArgs.Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("report without --ledger or --config: %v, want exit status 2", err)
	}
	if !strings.Contains(noArgsErr.String(), "the embedded default records no ledger") {
		t.Errorf("report without --ledger or --config: stderr %q, want it to say the embedded default records no ledger", noArgsErr.String())
	}
	// A config without a ledger: section is told what to add.
	bare := filepath.Join(dir, "bare.yaml")
	os.WriteFile(bare, []byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
`), 0o644)
	noLedger := exec.Command(bin, "report", "--config", bare, "--tenant", "acme")
	var noLedgerErr strings.Builder
	noLedger.Stderr = &noLedgerErr
	if err := noLedger.Run(); err == nil || !strings.Contains(noLedgerErr.String(), "add ledger: {file: ledger.jsonl}") {
		t.Errorf("report on a config without a ledger: %v, stderr %q, want it to say what to add", err, noLedgerErr.String())
	}
	// A tenant the ledger never names (a typo) is refused, exit 2, no page:
	// the error names the tenant it most likely stands for and the tenants
	// the ledger holds (adv47; it exited 0 with an empty page, a month
	// without spend to a finance reader); --allow-unknown-tenant writes the
	// empty page with the warning, as before. A tenant with records in
	// other months only gets its empty page and a warning saying where they
	// are (trial8: an empty page, no word); its page says it holds no record.
	for _, tc := range []struct {
		tenant, month string
		flags         []string
		exit          int    // 0: a page
		warn          string // "" for none
	}{
		{"acmee", "2026-11", nil, 2, `no record of tenant "acmee" in any month; did you mean "acme"? (tenants in it: acme, globex); --allow-unknown-tenant`},
		{"Globex", "2026-11", nil, 2, `did you mean "globex"?`},
		{"acmee", "2026-11", []string{"--allow-unknown-tenant"}, 0, `no record of tenant "acmee" in any month (tenants in it: acme, globex)`},
		{"acme", "2026-10", nil, 0, `no record of tenant "acme" in 2026-10 (UTC); its records run from 2026-11-01 to 2026-11-10`},
		{"acme", "2026-11", nil, 0, ""},
	} {
		cmd := exec.Command(bin, append([]string{"report", "--ledger", file, "--tenant", tc.tenant, "--month", tc.month}, tc.flags...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if tc.exit != 0 {
			if !errors.As(err, &exit) || exit.ExitCode() != tc.exit || len(out) > 0 {
				t.Errorf("report --tenant %s --month %s: %v, page %d bytes; want exit status %d and no page", tc.tenant, tc.month, err, len(out), tc.exit)
			}
		} else if err != nil || !strings.Contains(string(out), "<!DOCTYPE html>") {
			t.Errorf("report --tenant %s --month %s: %v, page %d bytes", tc.tenant, tc.month, err, len(out))
		}
		if tc.warn == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tc.warn) {
			t.Errorf("report --tenant %s --month %s: stderr %q, want %q", tc.tenant, tc.month, stderr.String(), tc.warn)
		}
		if noted := strings.Contains(string(out), `id="no-records"`); tc.exit == 0 && noted != (tc.warn != "") {
			t.Errorf("report --tenant %s --month %s: page notes no records: %v, want %v", tc.tenant, tc.month, noted, tc.warn != "")
		}
	}
}

// A config whose ledger.file is relative, read from another directory than
// serve's, fails with a message that says where the path is read from.
func TestReportRelativeLedgerNamesTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
limits: [{name: acme-monthly, scope: tenant, unit: usd, quota: 25, period: month}]
ledger: {file: rel-ledger.jsonl}
`), 0o644)
	cmd := exec.Command(binary(t), "report", "--config", cfg, "--tenant", "acme", "--month", "2026-11")
	cmd.Dir = t.TempDir() // not where any serve ran
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "relative to the working directory llmguard serve runs in") {
		t.Errorf("report with a relative ledger from elsewhere: %v, %s", err, out)
	}
}

// report on a config's ledger.file alone, under store.nodes above one,
// says the page is one node's (trial25: two nodes' files, the tenant's
// spend read from one); with every file given by --ledger, a stream, or
// one node, it says nothing.
func TestReportOneNodeFileNote(t *testing.T) {
	parse := func(nodes int, ledgerYAML string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0", nodes: %d}
ledger: %s
`, nodes, ledgerYAML)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	two := parse(2, "{file: ledger.jsonl}")
	if note := oneNodeFileNote(two, nil); !strings.Contains(note, "ledger.file ledger.jsonl of a config with store.nodes: 2") ||
		!strings.Contains(note, "--ledger a.jsonl --ledger b.jsonl") {
		t.Errorf("two nodes, the config's file: note %q, want one naming the file, the nodes and --ledger", note)
	}
	if note := oneNodeFileNote(two, []string{"a.jsonl", "b.jsonl"}); note != "" {
		t.Errorf("every file given: note %q, want none", note)
	}
	if note := oneNodeFileNote(parse(1, "{file: ledger.jsonl}"), nil); note != "" {
		t.Errorf("one node: note %q, want none", note)
	}
	if note := oneNodeFileNote(parse(2, "{redis_stream: llmguard:ledger}"), nil); note != "" {
		t.Errorf("a stream: note %q, want none", note)
	}
}

// report without --month reports the current month (as usage does), and
// repeated --ledger files are added up; a file named twice is refused.
func TestReportDefaultMonthAndSeveralLedgers(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	write := func(name string, n int) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for i := range n {
			enc.Encode(ledger.Record{TS: now.Add(-time.Duration(i) * time.Second), RequestID: fmt.Sprint(name, i), Tenant: "acme", User: "alice",
				Model: "gpt-4o-mini", Status: 200, CostMicroUSD: 1_000_000})
		}
		f.Close()
		return path
	}
	a, b := write("a.jsonl", 2), write("b.jsonl", 3)
	bin := binary(t)
	out, err := exec.Command(bin, "report", "--ledger", a, "--ledger", b, "--tenant", "acme", "--timezone", "UTC").Output()
	if err != nil {
		t.Fatalf("report without --month: %v", err)
	}
	if page := string(out); !strings.Contains(page, "acme — "+now.Format("January 2006")) || !strings.Contains(page, "$5.00") {
		t.Errorf("report over a.jsonl and b.jsonl, this month: want %q and $5.00 (2 + 3 records of $1)", "acme — "+now.Format("January 2006"))
	}
	if err := exec.Command(bin, "report", "--ledger", a, "--ledger", a, "--tenant", "acme").Run(); err == nil {
		t.Error("a ledger file named twice was read twice")
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin, "report", "--ledger", a, "--ledger", link, "--tenant", "acme").Run(); err == nil {
		t.Error("a ledger file and a link to it were read twice")
	}
}

// A report whose ledger stream's Redis refuses connections fails with one
// error naming the stream, and nothing of go-redis's own log: before, each
// try printed "redis: <date> pool.go:…: failed to dial after 5 attempts"
// above it, four lines of a library's internals (trial8).
func TestReportUnreachableStreamPrintsOneError(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme}]
ledger: {redis_stream: "llmguard:ledger"}
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0"}
`), 0o644)
	var stderr strings.Builder
	cmd := exec.Command(binary(t), "report", "--config", cfg, "--tenant", "acme")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("report against a refused Redis: %v, want exit status 1; stderr:\n%s", err, stderr.String())
	}
	got := stderr.String()
	if !strings.Contains(got, "llmguard:ledger") {
		t.Errorf("stderr %q does not name the stream", got)
	}
	if strings.Contains(got, "pool.go") || strings.Contains(got, "redis: 20") {
		t.Errorf("stderr carries go-redis's own log lines:\n%s", got)
	}
	if n := strings.Count(strings.TrimSpace(got), "\n") + 1; n != 1 {
		t.Errorf("stderr has %d lines, want the one error:\n%s", n, got)
	}
}

// A report read from the ledger stream sees only its month's entries
// (XRANGE), so a tenant absent from them is absent from the month, not
// from the ledger: the warning says so (it said "in any month"), and a
// tenant with entries in the month gets none.
func TestReportStreamAbsentTenantNamesTheMonth(t *testing.T) {
	srv := redistest.Start(t)
	ts := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	line, err := json.Marshal(ledger.Record{TS: ts, Tenant: "acme", User: "alice", Model: "gpt-4o-mini", Status: 200, CostMicroUSD: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().XAdd(context.Background(), &redis.XAddArgs{Stream: "llmguard:ledger",
		ID: fmt.Sprintf("%d-0", ts.UnixMilli()), Values: []any{"r", string(line)}}).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme}]
ledger: {redis_stream: "llmguard:ledger"}
store: {backend: redis, redis_url: "redis://%s/0"}
`, srv.Addr())), 0o644)
	// A tenant neither the month's entries nor the config name is refused
	// (adv47); one the config names (its key's) has a quiet month.
	for _, tc := range []struct{ tenant, month, warn string }{
		{"acme", "2026-11", ""},
		{"acme", "2026-10", `the ledger stream has no record of tenant "acme" in 2026-10; the report is empty`},
		{"acmee", "2026-11", `the ledger stream has no record of tenant "acmee" in 2026-11 and the config names no such tenant; did you mean "acme"? (tenants in it: acme)`},
	} {
		var stderr strings.Builder
		cmd := exec.Command(binary(t), "report", "--config", cfg, "--tenant", tc.tenant, "--month", tc.month)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if tc.tenant == "acmee" {
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.warn) {
				t.Errorf("report --tenant %s --month %s: %v, stderr %q; want exit status 2 and %q", tc.tenant, tc.month, err, stderr.String(), tc.warn)
			}
			continue
		}
		if err != nil {
			t.Fatalf("report --tenant %s --month %s: %v; stderr %s", tc.tenant, tc.month, err, stderr.String())
		}
		if tc.warn == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tc.warn) {
			t.Errorf("report --tenant %s --month %s: stderr %q, want %q", tc.tenant, tc.month, stderr.String(), tc.warn)
		}
		if tc.warn == "" && !strings.Contains(string(out), `id="total-requests">1<`) {
			t.Errorf("report --tenant %s --month %s: the month's entry is not on the page", tc.tenant, tc.month)
		}
	}
}

// --budget-usd NaN, like a negative or infinite one, is refused (exit 2,
// naming the flag). Before (adv48), NaN passed the range check (every
// comparison with NaN is false) and the report was drawn with no budget.
func TestReportRefusesNaNBudget(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	os.WriteFile(file, []byte(`{"ts":"2026-11-02T00:00:00Z","tenant":"acme","cost_usd_micros":5}`+"\n"), 0o644)
	for _, v := range []string{"NaN", "-1", "+Inf"} {
		out, err := exec.Command(binary(t), "report", "--ledger", file, "--tenant", "acme", "--month", "2026-11", "--budget-usd="+v).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--budget-usd must be between 0 and 1e12") {
			t.Errorf("--budget-usd %s: %v, %s", v, err, out)
		}
	}
}

// A ledger whose lines lie (a cost at the int64 maximum, then one at its
// minimum to take it back off, a negative token count) is read so that
// the month's spend is never below what its plausible lines say: the
// maximum saturates, the negative lines are skipped as unreadable and
// counted on stderr. Before, the two costs summed to $0.000004 on the
// page.
func TestReportLyingLedgerNeitherWrapsNorSubtracts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	lines := `{"ts":"2026-11-02T00:00:00Z","tenant":"acme","user":"alice","model":"m","status":200,"cost_micro_usd":9223372036854775807}
{"ts":"2026-11-02T00:00:01Z","tenant":"acme","user":"alice","model":"m","status":200,"cost_micro_usd":9223372036854775807}
{"ts":"2026-11-03T00:00:00Z","tenant":"acme","user":"alice","model":"m","status":200,"cost_micro_usd":-9223372036854775807}
{"ts":"2026-11-03T00:00:01Z","tenant":"acme","user":"bob","model":"m","status":200,"cost_micro_usd":5,"input_tokens":-9223372036854775807}
{"ts":"2026-11-04T00:00:00Z","tenant":"acme","user":"carol","model":"m","status":200,"cost_micro_usd":5}
`
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "report", "--ledger", file, "--tenant", "acme", "--month", "2026-11", "--timezone", "UTC", "--budget-usd", "100")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(out), "(9223372036854775807 micro-USD)") {
		t.Errorf("the page's total is not the int64 maximum (saturated): %s", totalLine(string(out)))
	}
	if !strings.Contains(stderr.String(), "skipped 2 unreadable ledger lines") {
		t.Errorf("stderr %q, want the 2 negative lines skipped", stderr.String())
	}
}

// totalLine is the page's "Total …" line, for a failure's message.
func totalLine(page string) string {
	if i := strings.Index(page, "Total "); i >= 0 {
		return page[i:min(len(page), i+200)]
	}
	return "(no total)"
}
