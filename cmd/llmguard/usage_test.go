package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/spec"
)

// `llmguard usage` prints the running proxy's report: --json as the
// endpoint gives it, else a table.
func TestUsageCommand(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme}, {key: sk-g, user: gina, tenant: globex}]
limits: [{name: acme-day, scope: tenant, unit: tokens, quota: 100000, period: day, timezone: Europe/Paris}]
ledger: {file: %q}
`, mock.URL, filepath.Join(dir, "ledger.jsonl"))), 0o644)
	bin := binary(t)
	admin := freeAddr(t)
	listen := freeAddr(t)
	srv := exec.Command(bin, "serve", "--config", cfg, "--listen", listen, "--admin-listen", admin)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	deadline := time.Now().Add(startWait)
	for {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("llmguard did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	out, err := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--period", "day", "--json").Output()
	if err != nil {
		t.Fatalf("usage --json: %v", err)
	}
	var rep app.UsageReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("usage --json printed %s: %v", out, err)
	}
	if rep.Requests != 3 || len(rep.Quotas) != 1 || rep.Quotas[0].Used != 3*(8+16) {
		t.Errorf("report: %s", out)
	}
	table, err := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--period", "day").Output()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	_, off := time.Now().In(paris(t)).Zone()
	offset := fmt.Sprintf("T00:00:00+%02d:00", off/3600)
	for _, want := range []string{"tenant acme", "gpt-4o-mini", "acme-day", "72", "(Europe/Paris)", offset} {
		if !strings.Contains(string(table), want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// --format csv: the header row, then total, tenant, user, model and
	// quota rows, the period in Paris time.
	out, err = exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--period", "day", "--format", "csv").Output()
	if err != nil {
		t.Fatalf("usage --format csv: %v", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 6 || !slices.Equal(rows[0], app.UsageCSVHeader) {
		t.Fatalf("csv (%v):\n%s", err, out)
	}
	for i, kind := range []string{"total", "tenant", "user", "model", "quota"} {
		r := rows[i+1]
		if r[0] != kind || !strings.HasSuffix(r[8], offset) || r[10] != "Europe/Paris" {
			t.Errorf("row %d %v: want a %s row in Paris time", i+1, r, kind)
		}
	}
	if rows[5][21] != "72" || rows[1][13] != "3" {
		t.Errorf("quota used %s (want 72 tokens), total requests %s (want 3)", rows[5][21], rows[1][13])
	}
	// A tenant with no request and nothing used of a quota (a typo) gets, with
	// --allow-unknown-tenant, its empty table and the node's note on stderr, which
	// knows no key names it; acme, which has both, gets none.
	for _, tc := range []struct {
		tenant string
		note   bool
	}{{"acmee", true}, {"acme", false}} {
		cmd := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", tc.tenant, "--allow-unknown-tenant")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		noted := strings.Contains(stderr.String(), `llmguard usage: no keys or records for tenant "`+tc.tenant+`" in this period: check its spelling`)
		if err != nil || !strings.Contains(string(out), "tenant "+tc.tenant) || noted != tc.note {
			t.Errorf("usage --tenant %s: %v, stdout %q, stderr %q; want a note: %v", tc.tenant, err, out, stderr.String(), tc.note)
		}
		// No --period: acme's only budget is daily, so the table is
		// today's and says why (before: the month's).
		if want := "tenant acme, day "; tc.tenant == "acme" && (!strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "--period day, week or month picks another")) {
			t.Errorf("usage --tenant acme without --period: %q, want it to start %q and say how to pick another period", out, want)
		}
	}
	// Without --allow-unknown-tenant the typo fails in every format, as
	// `llmguard report` does: exit 2, the note on stderr, nothing on stdout.
	// globex has a key and no request: not a typo, exit 0. With the flag,
	// json and csv print the report and the note too.
	for _, format := range []string{"table", "json", "csv"} {
		for _, tc := range []struct {
			tenant string
			allow  bool
			exit   int
			note   string
		}{
			{"acmee", false, 2, `llmguard: usage: no keys or records for tenant "acmee" in this period: check its spelling`},
			{"acmee", true, 0, `llmguard usage: no keys or records for tenant "acmee" in this period: check its spelling`},
			{"globex", false, 0, ""},
		} {
			args := []string{"usage", "--config", cfg, "--admin", admin, "--tenant", tc.tenant, "--period", "day", "--format", format}
			if tc.allow {
				args = append(args, "--allow-unknown-tenant")
			}
			cmd := exec.Command(bin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, _ := cmd.Output()
			name := fmt.Sprintf("usage --format %s --tenant %s (allow %v)", format, tc.tenant, tc.allow)
			if code := cmd.ProcessState.ExitCode(); code != tc.exit {
				t.Errorf("%s: exit %d, want %d; stderr %q", name, code, tc.exit, stderr.String())
			}
			if tc.note != "" && !strings.Contains(stderr.String(), tc.note) {
				t.Errorf("%s: stderr %q, want %q in it", name, stderr.String(), tc.note)
			}
			if tc.exit == 2 && (len(out) != 0 || !strings.Contains(stderr.String(), "--allow-unknown-tenant")) {
				t.Errorf("%s: stdout %q, stderr %q: want nothing printed and the flag named", name, out, stderr.String())
			}
			if tc.exit == 0 && len(out) == 0 {
				t.Errorf("%s: nothing on stdout", name)
			}
			if tc.tenant == "globex" && strings.Contains(stderr.String(), "check its spelling") {
				t.Errorf("%s: stderr %q: a tenant with a key is no typo", name, stderr.String())
			}
		}
	}
	// A config the node does not serve (here: another ledger file, as
	// another llmguard on that address would have) is refused (409, exit
	// 1) rather than answered with the node's own numbers; --any-config
	// asks anyway. The config above, named by another path, is the same.
	other := filepath.Join(dir, "other.yaml")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(other, bytes.Replace(b, []byte("ledger.jsonl"), []byte("other.jsonl"), 1), 0o644)
	cmd := exec.Command(bin, "usage", "--config", other, "--admin", admin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "409") || !strings.Contains(stderr.String(), "serves another config") ||
		!strings.Contains(stderr.String(), "--any-config") {
		t.Errorf("usage --config <another config>: %v, stderr %q; want a 409 naming another config and --any-config", err, stderr.String())
	}
	if out, err := exec.Command(bin, "usage", "--config", other, "--admin", admin, "--any-config").CombinedOutput(); err != nil {
		t.Errorf("usage --any-config: %v %s", err, out)
	}
	rel, _ := filepath.Rel(filepath.Dir(dir), cfg)
	same := exec.Command(bin, "usage", "--config", rel, "--admin", admin)
	same.Dir = filepath.Dir(dir)
	if out, err := same.CombinedOutput(); err != nil {
		t.Errorf("usage --config %s (the served config by a relative path): %v %s", rel, err, out)
	}
	// An unknown --timezone is a usage error (exit 2, as for report), said
	// before any node is asked; a known one is asked.
	for _, tc := range []struct {
		zone string
		code int
	}{{"Nowhere/X", 2}, {"Asia/Tokyo", 0}} {
		cmd := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--timezone", tc.zone)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || tc.code == 2 && !strings.Contains(stderr.String(), `unknown --timezone "Nowhere/X"`) {
			t.Errorf("usage --timezone %s: exit %d, stderr %q; want exit %d", tc.zone, code, stderr.String(), tc.code)
		}
	}
}

func paris(t *testing.T) *time.Location {
	t.Helper()
	l, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A model name is the caller's choice: one holding a newline or an escape
// sequence is printed quoted, so that it neither adds a row to
// `llmguard usage`'s table nor reaches the operator's terminal as a
// control sequence.
func TestUsageTableQuotesControlCharacters(t *testing.T) {
	var b strings.Builder
	printReport(&b, &app.UsageReport{Tenant: "acme", ByModel: []app.UsageRow{
		{Model: "gpt-4o-mini\nfake-model  999.000000"}, {Model: "m\x1b[2J\x1b]0;pwned\x07"}, {Model: "gpt-4o-mini"}}})
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nfake-model") {
		t.Errorf("control characters reached the table:\n%q", out)
	}
	if !strings.Contains(out, `"gpt-4o-mini\nfake-model  999.000000"`) || !strings.Contains(out, "\ngpt-4o-mini ") {
		t.Errorf("names not shown as expected:\n%s", out)
	}
}

// Requests that name no model (GET /v1/models, a multipart upload) are summed in
// a model row of their own, labelled "(none)" as `llmguard report` labels
// it, not with an empty first column.
func TestUsageTableNamesRecordsWithoutAModel(t *testing.T) {
	var b strings.Builder
	printReport(&b, &app.UsageReport{ByModel: []app.UsageRow{
		{Model: "gpt-4o-mini", Requests: 3}, {Model: "", Requests: 7}}})
	var rows []string
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 9 && f[len(f)-6] == "7" {
			rows = append(rows, line)
		}
	}
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "(none) ") {
		t.Errorf("the row of 7 requests without a model: %q, want one starting with \"(none) \" in:\n%s", rows, b.String())
	}
}

// Without a ledger (the embedded default) the report's first line says so,
// instead of "from the ledger none", and what to add to record spend.
func TestUsageTableSaysNoLedger(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"none", "no ledger configured (spend is not recorded: add ledger: {file: ledger.jsonl} to the config"},
		{"file", "from the ledger file"},
	} {
		var b strings.Builder
		printReport(&b, &app.UsageReport{Source: tc.source})
		if out := b.String(); !strings.Contains(out, tc.want) || strings.Contains(out, "ledger none") {
			t.Errorf("source %q: want %q in:\n%s", tc.source, tc.want, out)
		}
	}
}

// A period the caller did not name is said to be the budgets' (or the
// default month) with the flag that picks another; one the caller named
// gets no such line.
func TestUsageTableSaysHowThePeriodWasChosen(t *testing.T) {
	for _, tc := range []struct{ name, chosen, want string }{
		{"day", "budgets", "(the day: the longest period of the budgets that apply; --period day, week or month picks another)"},
		{"month", "default", "(the month: no budget applies; --period day, week or month picks another)"},
		{"week", "query", ""},
	} {
		var b strings.Builder
		printReport(&b, &app.UsageReport{Source: "file", Period: app.ReportPeriod{Name: tc.name, Chosen: tc.chosen}})
		lines := strings.Split(b.String(), "\n")
		if tc.want == "" && strings.Contains(b.String(), "--period") || tc.want != "" && lines[1] != tc.want {
			t.Errorf("chosen %q: want line 2 %q in:\n%s", tc.chosen, tc.want, b.String())
		}
	}
}

// A quota that outlasts its period at the burn rate so far shows the days
// until its reset marked as such; one that runs out first shows the
// projection alone; one not used yet a dash; under a day, hours and minutes
// follow the days (trial17: 11 minutes read "0.0").
func TestUsageTableDaysLeft(t *testing.T) {
	end := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	printReport(&b, &app.UsageReport{Quotas: []app.QuotaState{
		{Limit: "daily", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 7.0 / 24, LastsPeriod: true},
		{Limit: "fast", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 0.06},
		{Limit: "unused", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: -1},
		{Limit: "soon", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 11.0 / 24 / 60},
		{Limit: "weekly", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 2.5},
	}})
	rows := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = strings.TrimSpace(line)
		}
	}
	for limit, want := range map[string]string{"daily": "0.3 (7h00m, lasts the period)", "fast": "0.1 (1h26m)", "unused": "-", "soon": "0.0 (11m)", "weekly": "2.5"} {
		if !strings.HasSuffix(rows[limit], " "+want) {
			t.Errorf("%s: row %q, want it to end in %q", limit, rows[limit], want)
		}
	}
	if strings.Contains(rows["fast"], "lasts") {
		t.Errorf("fast: row %q says it lasts the period", rows["fast"])
	}
}

// The quota table names the span each days-left figure's rate is measured
// over, before the days left (trial26); an answer without it (an older
// node's) shows a dash.
func TestUsageTableRateSince(t *testing.T) {
	end := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	from := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	printReport(&b, &app.UsageReport{Quotas: []app.QuotaState{
		{Limit: "added", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 0.5, RateFrom: from, RateBasis: app.RateLimitAdded},
		{Limit: "old", Scope: "tenant", Subject: "acme", Unit: "tokens", PeriodEnd: end, DaysLeft: 2.5},
	}})
	for _, want := range []string{"rate since", "2026-12-15T12:00:00Z (limit added)  0.5 (12h00m)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "old" && (f[len(f)-2] != "-" || f[len(f)-1] != "2.5") {
			t.Errorf("a quota without rate_from: %q, want it to end in \"- 2.5\"", line)
		}
	}
}

// The burn rate is printed to the micro-dollar, as the spend is: a small
// one is not shown as $0.0000/day.
func TestUsageBurnRatePrecision(t *testing.T) {
	var b strings.Builder
	printReport(&b, &app.UsageReport{Spend: app.Spend{MicroUSD: 110, USD: 0.00011}, Requests: 2, BurnRateUSDPerDay: 0.000037})
	if want := "spend $0.000110 (110 µUSD) over 2 requests; burn rate $0.000037/day"; !strings.Contains(b.String(), want) {
		t.Errorf("want %q in:\n%s", want, b.String())
	}
}

// One request is "1 request", not "1 requests".
func TestUsageOneRequest(t *testing.T) {
	var b strings.Builder
	printReport(&b, &app.UsageReport{Spend: app.Spend{MicroUSD: 55, USD: 0.000055}, Requests: 1})
	if want := "over 1 request;"; !strings.Contains(b.String(), want) {
		t.Errorf("want %q in:\n%s", want, b.String())
	}
}

// A tenant dollar quota of the report's period that counts less than the
// ledger's spend of its tenant gets a note naming the usual causes
// (trial3: 55 used beside 105 µUSD spent after a Redis restart, in two
// tables, with nothing said); one that counts as much, another period's,
// and a tokens quota get none.
func TestQuotaBehindLedgerNotes(t *testing.T) {
	start, end := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	q := func(limit, subject, unit string, used int64, s, e time.Time) app.QuotaState {
		return app.QuotaState{Limit: limit, Scope: "tenant", Subject: subject, Unit: unit, Used: used, Quota: 1_000_000, PeriodStart: s, PeriodEnd: e}
	}
	rep := &app.UsageReport{Source: "redis_stream", Period: app.ReportPeriod{Name: "day", Start: start, End: end},
		ByTenant: []app.UsageRow{{Tenant: "dev-team", Spend: app.Spend{MicroUSD: 105}}, {Tenant: "acme", Spend: app.Spend{MicroUSD: 34296}}},
		Quotas: []app.QuotaState{
			q("team-daily", "dev-team", "micro_usd", 55, start, end),
			q("acme-daily", "acme", "micro_usd", 34296, start, end),
			q("acme-monthly", "dev-team", "micro_usd", 0, start.AddDate(0, 0, -4), end.AddDate(0, 0, 26)),
			q("team-tokens", "dev-team", "tokens", 0, start, end),
		}}
	notes := quotaBehindLedgerNotes(rep)
	if len(notes) != 1 || !strings.Contains(notes[0], "quota team-daily of tenant \"dev-team\" counts 55 µUSD used, less than the 105 µUSD") ||
		!strings.Contains(notes[0], "Redis restarted without its data") || !strings.Contains(notes[0], "in-memory store starts empty at every restart") {
		t.Fatalf("notes = %q, want one, for team-daily, naming the amounts and the causes (a restarted memory store's among them)", notes)
	}
	rep.Source = "none"
	if notes := quotaBehindLedgerNotes(rep); len(notes) != 0 {
		t.Errorf("without a ledger: notes = %q, want none", notes)
	}
}

// A tenant dollar quota that counts more than this node's ledger file
// holds for its tenant, on a shared store, gets a note saying the file is
// one node's (trial25: two nodes, $0.008315 read from one file beside a
// quota at 16,600 µUSD, nothing said); a quota that counts no more, a
// stream ledger (every node's) and the memory store (one node) get none.
func TestQuotaAheadOfNodeFileNotes(t *testing.T) {
	start, end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	q := func(subject string, used int64) app.QuotaState {
		return app.QuotaState{Limit: "tenant-monthly", Scope: "tenant", Subject: subject, Unit: "micro_usd", Used: used, Quota: 50_000_000, PeriodStart: start, PeriodEnd: end}
	}
	rep := &app.UsageReport{Source: "file", Period: app.ReportPeriod{Name: "month", Start: start, End: end},
		ByTenant: []app.UsageRow{{Tenant: "acme", Spend: app.Spend{MicroUSD: 8315}}, {Tenant: "globex", Spend: app.Spend{MicroUSD: 16548}}},
		Quotas:   []app.QuotaState{q("acme", 16600), q("globex", 16548), q("initech", 40)}}
	notes := quotaAheadOfNodeFileNotes(rep, spec.BackendRedis)
	if len(notes) != 2 || !strings.Contains(notes[0], `quota tenant-monthly of tenant "acme" counts 16600 µUSD used, more than the 8315 µUSD this node's ledger file holds`) ||
		!strings.Contains(notes[0], "--ledger a.jsonl --ledger b.jsonl") || !strings.Contains(notes[0], "ledger.redis_stream") ||
		!strings.Contains(notes[1], `tenant "initech" counts 40 µUSD used, more than the 0 µUSD`) {
		t.Fatalf("notes = %q, want acme's and initech's (no spend in this file), naming the other nodes' files and the stream", notes)
	}
	if notes := quotaAheadOfNodeFileNotes(rep, spec.BackendMemory); len(notes) != 0 {
		t.Errorf("memory store: notes = %q, want none (one node)", notes)
	}
	rep.Source = "redis_stream"
	if notes := quotaAheadOfNodeFileNotes(rep, spec.BackendRedisCluster); len(notes) != 0 {
		t.Errorf("stream ledger: notes = %q, want none (every node's records)", notes)
	}

	// No quota to compare: store.nodes still says the file is one node's.
	cfg, err := config.Parse([]byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0", nodes: 2}
ledger: {file: ledger.jsonl}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep.Quotas = nil
	if notes := nodeFileNotes(rep, cfg); len(notes) != 0 {
		t.Errorf("stream ledger, no quota: notes = %q, want none", notes)
	}
	rep.Source = "file"
	if notes := nodeFileNotes(rep, cfg); len(notes) != 1 || !strings.Contains(notes[0], "llmguard usage: read the one ledger.file ledger.jsonl of a config with store.nodes: 2") {
		t.Errorf("a file, store.nodes 2, no quota: notes = %q, want the one-node note", notes)
	}
}

// A row shows its input's cached and cache-write parts, which are priced
// apart: trial24's finance check of a Claude user (4,800 input tokens, of
// which 4,000 cache reads and 800 cache writes, $0.0342) by input × the
// input price alone came to $0.0444.
func TestUsageTableShowsCachedInput(t *testing.T) {
	var b strings.Builder
	printReport(&b, &app.UsageReport{ByUser: []app.UsageRow{{Tenant: "acme", User: "bob", Requests: 40,
		Spend:  app.Spend{MicroUSD: 34200, USD: 0.0342},
		Tokens: app.TokenTotals{Input: 4800, CachedInput: 4000, CacheWrite: 800, Output: 2000}}}})
	lines := strings.Split(b.String(), "\n")
	var header, row []string
	for i, line := range lines {
		if strings.HasPrefix(line, "user ") && i+1 < len(lines) {
			header, row = strings.Split(line, "  "), strings.Fields(lines[i+1])
		}
	}
	if header == nil || !strings.Contains(b.String(), "input tokens  of which cached  cache writes  output tokens") {
		t.Fatalf("no user table with the cached columns in:\n%s", b.String())
	}
	if want := []string{"acme/bob", "0.034200", "34200", "40", "0", "4800", "4000", "800", "2000"}; strings.Join(row, " ") != strings.Join(want, " ") {
		t.Errorf("row %q, want %q", row, want)
	}
}
