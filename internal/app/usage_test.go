package app

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/valyala/fasthttp"
)

// GET /admin/usage: bearer-protected; spend from the ledger to the
// micro-dollar, per tenant, user and model; each quota's used and
// remaining from the store, agreeing with the ledger.
func TestAdminUsageReport(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "s3cret")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month}
ledger: {file: %q}
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
`, file))
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "x-mock-completion-tokens", "9")
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":true}`, "x-mock-completion-tokens", "4")

	get := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, h.admin+"/admin/usage?tenant=acme&period=month", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// A loopback caller needs the token too; the 401 is JSON naming the
	// header to send.
	for _, tok := range []string{"", "wrong"} {
		resp, b := get(tok)
		const want = `{"error":"unauthorized","message":"send the admin token (the value of the variable admin_token_env names) in the Authorization header: Authorization: Bearer <token>"}`
		if resp.StatusCode != 401 || string(b) != want || resp.Header.Get("Content-Type") != "application/json" ||
			resp.Header.Get("WWW-Authenticate") != `Bearer realm="llmguard-admin"` {
			t.Errorf("token %q: %d %q %q, want 401 application/json %s", tok, resp.StatusCode, resp.Header.Get("Content-Type"), b, want)
		}
	}
	resp, body := get("s3cret")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var rep UsageReport
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 3 || rep.Spend.MicroUSD <= 0 || rep.Source != "file" {
		t.Fatalf("report: %s", body)
	}
	var byModel int64
	for _, m := range rep.ByModel {
		byModel += m.Spend.MicroUSD
	}
	if byModel != rep.Spend.MicroUSD || len(rep.ByModel) != 2 || len(rep.ByUser) != 1 || len(rep.ByTenant) != 1 {
		t.Errorf("per-model spend %d vs total %d; rows %d models, %d users, %d tenants", byModel, rep.Spend.MicroUSD,
			len(rep.ByModel), len(rep.ByUser), len(rep.ByTenant))
	}
	if rep.Spend.USD != float64(rep.Spend.MicroUSD)/1e6 || rep.BurnRateUSDPerDay <= 0 {
		t.Errorf("spend %+v, burn rate %v", rep.Spend, rep.BurnRateUSDPerDay)
	}
	if len(rep.Quotas) != 1 {
		t.Fatalf("quotas: %+v", rep.Quotas)
	}
	q := rep.Quotas[0]
	// The store's quota holds exactly what the ledger says was spent.
	if q.Limit != "acme-month" || q.Quota != 1_000_000 || q.Used != rep.Spend.MicroUSD || q.Remaining != q.Quota-q.Used || q.Unit != "micro_usd" {
		t.Errorf("quota %+v, want used = ledger spend %d", q, rep.Spend.MicroUSD)
	}
	if !q.PeriodEnd.After(q.PeriodStart) || q.DaysLeft <= 0 {
		t.Errorf("quota period/days left: %+v", q)
	}
}

// TestAdminUsageEmptyListsAreArrays: with no ledger and no quota (the
// embedded default's case), /admin/usage answers [] for its lists, never
// null, so that a reader can iterate them (jq '.by_tenant[]').
func TestAdminUsageEmptyListsAreArrays(t *testing.T) {
	h := startFlavors(t, "")
	resp, err := http.Get(h.admin + "/admin/usage?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"by_tenant", "by_user", "by_model", "quotas"} {
		if v := strings.Join(strings.Fields(string(got[k])), ""); v != "[]" {
			t.Errorf("%s = %s, want []", k, got[k])
		}
	}
}

// /admin/usage reports its period in the budget's own zone (RFC 3339 with
// the offset), a timezone= override, and the same report as CSV: a header
// row, one row per tenant, user, model and quota, spend exact in
// micro-USD; bad formats and zones are refused with 400.
func TestAdminUsageZoneAndCSV(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := start(t, fmt.Sprintf(`limits:
  - {name: acme-month, scope: tenant, unit: usd, quota: 5, period: month, timezone: Asia/Tokyo}
ledger: {file: %q}
`, file))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`
	h.post(testKey, body)
	h.post("sk-test-bob", body)
	get := func(q string) (int, http.Header, []byte) {
		resp, err := http.Get(h.admin + "/admin/usage?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	code, _, b := get("tenant=acme")
	var rep UsageReport
	if err := json.Unmarshal(b, &rep); code != 200 || err != nil {
		t.Fatalf("%d %s %v", code, b, err)
	}
	if _, off := rep.Period.Start.Zone(); off != 9*3600 || rep.Period.TimeZone != "Asia/Tokyo" || rep.Period.Start.Day() != 1 ||
		!strings.Contains(string(b), `"start": "`+rep.Period.Start.Format("2006-01-02")+`T00:00:00+09:00"`) {
		t.Errorf("period %+v: want the month from the 1st, 00:00 +09:00 (Asia/Tokyo)\n%s", rep.Period, b)
	}
	code, _, b = get("tenant=acme&timezone=America/New_York")
	if err := json.Unmarshal(b, &rep); code != 200 || err != nil || rep.Period.TimeZone != "America/New_York" {
		t.Errorf("timezone override: %d %+v", code, rep.Period)
	}
	code, hdr, b := get("tenant=acme&format=csv")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s %s", code, hdr.Get("Content-Type"), b)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("csv does not parse: %v\n%s", err, b)
	}
	if !slices.Equal(rows[0], UsageCSVHeader) {
		t.Fatalf("header %v", rows[0])
	}
	col := func(r []string, name string) string { return r[slices.Index(UsageCSVHeader, name)] }
	kinds := map[string]int{}
	var models int64
	for _, r := range rows[1:] {
		if len(r) != len(UsageCSVHeader) {
			t.Fatalf("row %v: %d cells", r, len(r))
		}
		kinds[r[0]]++
		if r[0] == "model" {
			n, _ := strconv.ParseInt(col(r, "spend_micro_usd"), 10, 64)
			models += n
		}
		if !strings.HasSuffix(col(r, "period_start"), "T00:00:00+09:00") || col(r, "timezone") != "Asia/Tokyo" {
			t.Errorf("row %v: period not in Tokyo time", r)
		}
	}
	if kinds["total"] != 1 || kinds["tenant"] != 1 || kinds["user"] != 2 || kinds["model"] != 1 || kinds["quota"] != 1 {
		t.Errorf("rows by kind %v, want 1 total, 1 tenant, 2 users, 1 model, 1 quota\n%s", kinds, b)
	}
	total := rows[1]
	if col(total, "row") != "total" || col(total, "spend_micro_usd") != strconv.FormatInt(models, 10) || models <= 0 ||
		col(total, "requests") != "2" || col(total, "spend_usd") != usd(models) {
		t.Errorf("total row %v: want the models' spend %d µUSD over 2 requests", total, models)
	}
	for _, q := range []string{"format=xml", "timezone=Mars/Olympus", "timezone=../../etc/passwd", "timezone=" + strings.Repeat("A", 100)} {
		if code, _, b := get(q); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, b)
		}
	}
}

// CSV cells a spreadsheet would run as a formula are neutralised, and
// dollars are exact.
func TestUsageCSVCells(t *testing.T) {
	var buf bytes.Buffer
	rep := &UsageReport{Period: ReportPeriod{Name: "month", Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), TimeZone: "UTC"},
		ByUser: []UsageRow{{Tenant: "acme", User: "=HYPERLINK(\"http://x\")", Spend: spendOf(1_234_567)}}}
	if err := WriteUsageCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if u := rows[2][2]; u != "'=HYPERLINK(\"http://x\")" {
		t.Errorf("user cell %q: formula not neutralised", u)
	}
	if d := rows[2][12]; d != "1.234567" {
		t.Errorf("spend_usd %q, want 1.234567", d)
	}
	if usd(-5) != "-0.000005" {
		t.Errorf("usd(-5) = %s", usd(-5))
	}
}

// /admin/usage sums the ledger's backups with the file, reading them
// record by record (it used to hold every record of every backup in
// memory at once: 1.3 GB for 400 MB of ledger), and does not read a backup
// last written before the period began.
func TestAdminUsageReadsBackupsOfThePeriodOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month}
ledger: {file: %q}
`, file))
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	now := time.Now().UTC()
	line := func(model string) []byte {
		return []byte(fmt.Sprintf(`{"ts":%q,"request_id":"r-%s","key_id":"k","user":"u","tenant":"acme","model":%q,"flavor":"openai","status":200,"input_tokens":1,"output_tokens":1,"cost_micro_usd":7}`+"\n",
			now.Format(time.RFC3339Nano), model, model))
	}
	recent := filepath.Join(dir, "ledger-"+now.Add(-time.Minute).Format("2006-01-02T15-04-05.000")+".jsonl")
	old := filepath.Join(dir, "ledger-"+now.Add(-2*time.Minute).Format("2006-01-02T15-04-05.000")+".jsonl")
	// A torn line in the recent backup: skipped, and counted in the report.
	if err := os.WriteFile(recent, append(line("from-backup"), []byte("ed\":false}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, line("from-old-backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	longAgo := now.AddDate(0, -2, 0)
	if err := os.Chtimes(old, longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(h.admin + "/admin/usage?tenant=acme&period=month")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	models := map[string]bool{}
	for _, m := range rep.ByModel {
		models[m.Model] = true
	}
	if rep.Requests != 2 || !models["from-backup"] || !models["gpt-4o-mini"] || models["from-old-backup"] {
		t.Errorf("report: %d requests, models %v; want the file's and the recent backup's, not the backup written before the period", rep.Requests, models)
	}
	if rep.UnreadableLines != 1 {
		t.Errorf("report: %d unreadable lines, want the recent backup's torn one", rep.UnreadableLines)
	}
}

// The admin listener closes a connection that never finishes its request
// (it held one forever: 3,000 half-sent requests held 3,000 descriptors
// for minutes, the proxy's own limit of descriptors shared with them).
func TestAdminListenerDropsSilentConnections(t *testing.T) {
	defer func(r, i time.Duration) { adminReadTimeout, adminIdleTimeout = r, i }(adminReadTimeout, adminIdleTimeout)
	adminReadTimeout, adminIdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	h := startFlavors(t, "")
	addr := strings.TrimPrefix(h.admin, "http://")
	for _, first := range []string{"", "GET /healthz HTTP/1.1\r\nHost: x\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if first != "" {
			c.Write([]byte(first))
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("sent %q: the admin listener still held the connection after 20s (%v)", first, err)
		}
	}
}

// /admin/usage answers 503 with Retry-After when the ledger cannot be read
// (its Redis is down): the failure is the server's, not the query's (400).
func TestAdminUsageLedgerDownIs503(t *testing.T) {
	dead := refusedAddr(t)
	h := start(t, fmt.Sprintf(`ledger: {redis_stream: "llmguard:ledger", redis_url: "redis://%s"}
`, dead))
	resp, err := http.Get(h.admin + "/admin/usage?period=month")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "usage cannot be read now") {
		t.Errorf("ledger down: %d Retry-After %q %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp2, err := http.Get(h.admin + "/admin/usage?period=year")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 400 {
		t.Errorf("bad period: %d, want 400", resp2.StatusCode)
	}
}

// Only errors that may pass by themselves make /admin/usage a 503 with
// Retry-After: a ledger file that cannot be read is a 500 (no retry mends
// a permission or a directory where the file should be).
func TestUsageErrorsTransientOrNot(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("ledger: xrange s: %w", dial), true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{&fs.PathError{Op: "open", Path: "/var/lib/llmguard/ledger.jsonl", Err: syscall.EACCES}, false},
		{&fs.PathError{Op: "read", Path: "/var/lib/llmguard/ledger.jsonl", Err: syscall.EISDIR}, false},
		{errors.New("csv: write failed"), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A ledger Redis that takes connections and never answers (a frozen
// process, SIGSTOP) gets one XRANGE from /admin/usage, not go-redis's four
// tries of its 3 s read timeout: the page's deadline ends the read and
// its retries (ledger.ScanStream, ContextTimeoutEnabled on the ledger's
// client), and the answer is the 503. Before, the read took 4 tries
// (10 s).
func TestAdminUsageFrozenLedgerRedisTriesOnce(t *testing.T) {
	var xranges atomic.Int64
	// The handshake is answered, no command is.
	addr := redistest.Fake(t, func(args []string) string {
		switch strings.ToUpper(args[0]) {
		case "HELLO": // go-redis then speaks RESP2
			return "-ERR unknown command 'HELLO'\r\n"
		case "CLIENT", "PING", "SELECT":
			return "+OK\r\n"
		case "XRANGE":
			xranges.Add(1)
		}
		return ""
	})
	h := start(t, fmt.Sprintf(`ledger: {redis_stream: "llmguard:ledger", redis_url: "redis://%s"}
`, addr))
	resp, err := http.Get(h.admin + "/admin/usage?period=month")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "usage cannot be read now") {
		t.Errorf("frozen ledger Redis: %d %s, want 503", resp.StatusCode, b)
	}
	if n := xranges.Load(); n != 1 {
		t.Errorf("frozen ledger Redis: %d XRANGE sent, want 1 (one page, its deadline ends the retries)", n)
	}
}

// /admin/usage with the quota store's Redis down answers 503 with a
// message that says once what failed: the take of the quota's key, the
// store unavailable, the dial's error. Before, it read "… (the ledger's or
// the quota store's Redis failed; try again): bucket: take: store
// unavailable: bucket: take \"llmguard:{acme}:…\": dial tcp …": the
// operation twice, and a guess between two Redis.
func TestAdminUsageStoreDownSaysOnceWhatFailed(t *testing.T) {
	dead := refusedAddr(t)
	h := start(t, fmt.Sprintf(`limits:
  - {name: acme-requests, scope: tenant, unit: requests, quota: 10, period: month}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 5s}
`, dead))
	resp, err := http.Get(h.admin + "/admin/usage?period=month")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got struct{ Error string }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := `usage cannot be read now (try again): bucket: take "llmguard:{acme}:acme-requests:acme": store unavailable: dial tcp ` + dead + `: connect: connection refused`
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || got.Error != want {
		t.Errorf("store down: %d Retry-After %q\n%s\nwant 503 with Retry-After and\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), got.Error, want)
	}
}

// Without admin_token_env, a non-loopback caller gets 401 with a JSON body
// saying /admin/* answers loopback callers only; a loopback one passes.
func TestAdminGateLoopbackOnly(t *testing.T) {
	a := &App{}
	a.cfg.Store(&config.Config{})
	for _, tc := range []struct {
		ip   string
		pass bool
	}{{"10.0.0.7", false}, {"127.0.0.1", true}} {
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 4000}, nil)
		_, ok := a.adminGate(&ctx)
		if ok != tc.pass {
			t.Errorf("%s: passed %v, want %v", tc.ip, ok, tc.pass)
		}
		if !tc.pass && (ctx.Response.StatusCode() != 401 || string(ctx.Response.Body()) != adminUnauthorizedLoopback ||
			string(ctx.Response.Header.ContentType()) != "application/json") {
			t.Errorf("%s: %d %q %s", tc.ip, ctx.Response.StatusCode(), ctx.Response.Header.ContentType(), ctx.Response.Body())
		}
	}
	if !strings.Contains(adminUnauthorizedLoopback, "Authorization: Bearer") || !strings.Contains(adminUnauthorizedLoopback, "loopback") {
		t.Errorf("the body names neither the header nor loopback: %s", adminUnauthorizedLoopback)
	}
}

// A quota row carries the store's amounts in quota, used and remaining
// and leaves the spend columns empty, dollar quota or not: a store that
// lost its data (used 0) no longer shows a spend of 0 beside the ledger's.
func TestUsageCSVQuotaRowsHoldNoSpend(t *testing.T) {
	var buf bytes.Buffer
	p := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	rep := &UsageReport{Period: ReportPeriod{Name: "month", Start: p, End: p.AddDate(0, 1, 0), TimeZone: "UTC"},
		Spend: spendOf(110), Requests: 1,
		Quotas: []QuotaState{
			{Limit: "acme-usd", Scope: "tenant", Subject: "acme", Unit: "micro_usd", Quota: 1_000_000, Used: 0, Remaining: 1_000_000, PeriodStart: p, PeriodEnd: p.AddDate(0, 1, 0), DaysLeft: -1},
			{Limit: "acme-tok", Scope: "tenant", Subject: "acme", Unit: "tokens", Quota: 5000, Used: 40, Remaining: 4960, PeriodStart: p, PeriodEnd: p.AddDate(0, 1, 0), DaysLeft: -1},
		}}
	if err := WriteUsageCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(r []string, name string) string { return r[slices.Index(UsageCSVHeader, name)] }
	if col(rows[1], "spend_micro_usd") != "110" {
		t.Errorf("total row %v: spend not 110", rows[1])
	}
	for _, r := range rows[2:] {
		if col(r, "row") != "quota" || col(r, "spend_micro_usd") != "" || col(r, "spend_usd") != "" {
			t.Errorf("quota row %v: want empty spend columns", r)
		}
	}
	if col(rows[2], "used") != "0" || col(rows[3], "used") != "40" || col(rows[3], "remaining") != "4960" {
		t.Errorf("quota rows %v: used/remaining not the store's", rows[2:])
	}
}

// /admin/usage for a tenant no key names, with nothing in the ledger,
// answers 200 with a "note" saying so; a tenant with keys but no request
// yet gets one of its own; one with requests gets no "note" at all (the
// field is additive: absent when there is nothing to say).
func TestAdminUsageUnknownTenantNote(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month}
ledger: {file: %q}
`, file))
	get := func(tenant string) (map[string]any, string) {
		resp, err := http.Get(h.admin + "/admin/usage?tenant=" + tenant)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s: %d %s %v", tenant, resp.StatusCode, b, err)
		}
		note, _ := m["note"].(string)
		return m, note
	}
	if m, note := get("acme"); !strings.Contains(note, `tenant "acme" has keys but no request`) || !strings.Contains(note, "calls it refused (401, 403, 429) are not here") || m["unknown_tenant"] != nil {
		t.Errorf("acme before any request: note %q, unknown_tenant %v (want none: it has keys)", note, m["unknown_tenant"])
	}
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	if m, _ := get("acme"); m["note"] != nil {
		t.Errorf("acme with a request: note %v, want none", m["note"])
	}
	m, note := get("acmee")
	if want := `no keys or records for tenant "acmee" in this period: check its spelling`; !strings.Contains(note, want) {
		t.Errorf("acmee: note %q, want %q", note, want)
	}
	// The signal `llmguard usage` exits 2 on (adv50), apart from the
	// note's words.
	if m["unknown_tenant"] != true {
		t.Errorf("acmee: unknown_tenant %v, want true", m["unknown_tenant"])
	}
	// `llmguard usage` prints this note as it is, so it names the CLI's
	// flag beside the endpoint's parameter (trial12: it named tenant= only).
	if want := "`llmguard usage` without --tenant, or /admin/usage without tenant="; !strings.Contains(note, want) {
		t.Errorf("acmee: note %q, want it to name both ways to leave the tenant out: %q", note, want)
	}
	for _, k := range []string{"by_tenant", "by_user", "by_model", "quotas"} {
		if l, ok := m[k].([]any); !ok || len(l) != 0 {
			t.Errorf("acmee: %s = %v, want []", k, m[k])
		}
	}
}

// A month's usage follows the tenant's monthly budget's zone, as `llmguard
// report` does, even when a daily quota in another zone (UTC, the default)
// applies to the tenant too: the daily quota's zone bounds the day's
// report. Before, any two zones among the tenant's quotas made every
// period UTC, so `usage --tenant acme` and `report --tenant acme` summed
// different months for a budget in Asia/Tokyo.
func TestUsageZoneFollowsThePeriodsBudgets(t *testing.T) {
	h := start(t, `limits:
  - {name: acme-month, scope: tenant, unit: usd, quota: 5, period: month, timezone: Asia/Tokyo}
  - {name: user-day, scope: user, unit: tokens, quota: 100000, period: day}
`)
	for _, tc := range []struct {
		period, want string
	}{
		{period: "month", want: "Asia/Tokyo"}, // the monthly budget's, not UTC
		{period: "day", want: "UTC"},          // the daily quota's (its default)
		{period: "week", want: "UTC"},         // no weekly quota: both zones, which differ
	} {
		rep, err := h.app.Usage(context.Background(), "acme", tc.period)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Period.TimeZone != tc.want {
			t.Errorf("period %s: zone %s, want %s", tc.period, rep.Period.TimeZone, tc.want)
		}
	}
}

// A report that names no period covers the longest period of the budgets
// that apply (to the tenant asked for, or to every key), so that a config
// whose budgets are all daily reports today; with no budget it covers the
// month. Period.Chosen says which, so that `llmguard usage` can say how
// the period was picked. Before, every such report was the month's,
// whatever the budgets: a finance team with a daily budget saw thirty days
// of spend beside one day's quota.
func TestUsagePeriodFollowsTheBudgets(t *testing.T) {
	for _, tc := range []struct {
		name, limits     string
		tenant           string
		want, wantChosen string
		// identity is a config identity: section; wantQuota, when not "",
		// a quota row ("<limit> <scope> <subject>") the report lists.
		identity, wantQuota string
	}{
		{name: "daily only", limits: `
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day}`, want: "day", wantChosen: "budgets"},
		{name: "daily only, one tenant", tenant: "acme", limits: `
  - {name: user-day, scope: user, unit: tokens, quota: 100000, period: day}`, want: "day", wantChosen: "budgets"},
		{name: "daily and weekly", limits: `
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day}
  - {name: acme-week, scope: tenant, unit: usd, quota: 20, period: week}`, want: "week", wantChosen: "budgets"},
		{name: "daily and monthly", limits: `
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day}
  - {name: acme-month, scope: tenant, unit: usd, quota: 50, period: month}`, want: "month", wantChosen: "budgets"},
		// A monthly budget of a tenant no key belongs to (its keys revoked
		// or removed) still holds the tenant's spend this period: the
		// fleet's report covers it, as the tenant's own does (trial13;
		// before, "day": the budget applied to nobody).
		{name: "another tenant's month", limits: `
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day, tenants: [acme]}
  - {name: globex-month, scope: tenant, unit: usd, quota: 50, period: month, tenants: [globex]}`, want: "month", wantChosen: "budgets", wantQuota: "globex-month tenant globex"},
		// A tenant's budget seen from that tenant's colleague: one named
		// tenant with keys keeps its day.
		{name: "another tenant's month, one tenant", tenant: "acme", limits: `
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day, tenants: [acme]}
  - {name: globex-month, scope: tenant, unit: usd, quota: 50, period: month, tenants: [globex]}`, want: "day", wantChosen: "budgets"},
		{name: "no budget", limits: `
  - {name: user-rpm, scope: user, unit: requests, rate: 10, per: 1m}`, want: "month", wantChosen: "default"},
		// Pass-through callers have no key in the config: their budgets
		// apply to the principal they share (trial7: "no budget applies",
		// the month, beside a daily budget of theirs).
		{name: "pass-through callers' day", identity: "identity: {pass_through: true, tenant: pt}\n", limits: `
  - {name: pt-day, scope: tenant, unit: usd, quota: 5, period: day, tenants: [pt]}`, want: "day", wantChosen: "budgets", wantQuota: "pt-day tenant pt"},
		{name: "pass-through callers' day, one tenant", identity: "identity: {pass_through: true, tenant: pt}\n", tenant: "pt", limits: `
  - {name: pt-user-day, scope: user, unit: tokens, quota: 100000, period: day, tenants: [pt]}`, want: "day", wantChosen: "budgets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startFrozen(t, tc.identity+"limits:"+tc.limits+"\n")
			rep, err := h.app.Usage(context.Background(), tc.tenant, "")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Period.Name != tc.want || rep.Period.Chosen != tc.wantChosen {
				t.Errorf("no period named: %s (chosen %q), want %s (chosen %q)", rep.Period.Name, rep.Period.Chosen, tc.want, tc.wantChosen)
			}
			if want := map[string]time.Duration{"day": 24 * time.Hour}[tc.want]; want != 0 && rep.Period.End.Sub(rep.Period.Start) != want {
				t.Errorf("period %v – %v, want one day", rep.Period.Start, rep.Period.End)
			}
			if tc.wantQuota != "" && !slices.ContainsFunc(rep.Quotas, func(q QuotaState) bool { return q.Limit+" "+q.Scope+" "+q.Subject == tc.wantQuota }) {
				t.Errorf("quota rows %+v, want %s", rep.Quotas, tc.wantQuota)
			}
			// A period the query names is kept, whatever the budgets.
			rep, err = h.app.Usage(context.Background(), tc.tenant, "month")
			if err != nil || rep.Period.Name != "month" || rep.Period.Chosen != "query" {
				t.Errorf("period=month: %v %+v, want the month, chosen \"query\"", err, rep.Period)
			}
		})
	}
}

// A tenant that a budget names in its `tenants:` keeps that budget in its
// usage report when it has no key (its keys revoked, expired or removed
// from the file): the quota row, the budget's period and its zone
// (trial12: after acme's keys were revoked, `usage --tenant acme` said "no
// budget applies", dropped the budget's row and reported the month in UTC
// instead of the budget's Europe/Paris). The tenant alone has no user, so a
// user-scoped quota gets no row; a tenant no limit names (a misspelt one)
// still gets no budget.
func TestUsageNamedTenantWithoutKeys(t *testing.T) {
	h := start(t, `limits:
  - {name: globex-month, scope: tenant, unit: usd, quota: 5, period: month, timezone: Europe/Paris, tenants: [globex]}
  - {name: globex-user-day, scope: user, unit: tokens, quota: 1000, period: day, tenants: [globex]}
`)
	rep, err := h.app.Usage(context.Background(), "globex", "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Period.Name != "month" || rep.Period.Chosen != "budgets" || rep.Period.TimeZone != "Europe/Paris" {
		t.Errorf("globex: period %s (chosen %q) in %s, want month (chosen \"budgets\") in Europe/Paris", rep.Period.Name, rep.Period.Chosen, rep.Period.TimeZone)
	}
	if len(rep.Quotas) != 1 || rep.Quotas[0].Limit != "globex-month" || rep.Quotas[0].Subject != "globex" || rep.Quotas[0].Used != 0 || rep.Quotas[0].Quota != 5_000_000 {
		t.Errorf("globex: quota rows %+v, want globex-month's alone, 0 of 5000000 used", rep.Quotas)
	}
	rep, err = h.app.Usage(context.Background(), "globexx", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Quotas) != 0 || rep.Period.Chosen != "default" {
		t.Errorf("globexx: quota rows %+v, period chosen %q, want none and \"default\"", rep.Quotas, rep.Period.Chosen)
	}
}

// The fleet's usage report (no tenant named) keeps the budgets of a
// tenant that has no key left, as that tenant's own report does
// (TestUsageNamedTenantWithoutKeys): its spend so far is the period's, so
// the quota rows stay, with what they used, and the period follows them
// (trial13: after globex's last key was removed, `llmguard usage` dropped
// globex-month, spend and all, and reported acme's day instead of the
// month). A budget that names no tenant keeps the row of initech, whose
// last key was removed too and which no limit names, in the fleet's
// report and initech's own, since the ledger has initech's records of the
// period.
func TestUsageFleetKeepsTenantWithoutKeys(t *testing.T) {
	const limits = `limits:
  - {name: acme-day, scope: tenant, unit: usd, quota: 5, period: day, tenants: [acme]}
  - {name: globex-month, scope: tenant, unit: usd, quota: 5, period: month, timezone: Europe/Paris, tenants: [globex]}
  - {name: team-week, scope: tenant, unit: requests, quota: 100, period: week}
ledger: {file: %q}
`
	h, path, write, without := startWithFileKeys(t, limits,
		"  - {key: sk-test-globex, user: gina, tenant: globex}\n  - {key: sk-test-initech, user: ian, tenant: initech}\n")
	for _, key := range []string{"sk-test-globex", "sk-test-initech"} {
		if resp, body := h.post(key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`); resp.StatusCode != 200 {
			t.Fatalf("%s's call: %d %s", key, resp.StatusCode, body)
		}
	}
	globexUsed := func(rep *UsageReport) int64 { return quotaUsed(rep, "globex-month", "globex") }
	before, err := h.app.Usage(context.Background(), "globex", "")
	if err != nil {
		t.Fatal(err)
	}
	if globexUsed(before) <= 0 {
		t.Fatalf("globex's report: quota rows %+v, want globex-month with its call's spend", before.Quotas)
	}
	write(without) // globex's and initech's last keys removed
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	rep, err := h.app.Usage(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := globexUsed(rep); got != globexUsed(before) {
		t.Errorf("fleet report: globex-month used %d (-1: no row), want %d; quota rows %+v", got, globexUsed(before), rep.Quotas)
	}
	if rep.Period.Name != "month" || rep.Period.Chosen != "budgets" {
		t.Errorf("fleet report: period %s (chosen %q), want the month of globex's budget", rep.Period.Name, rep.Period.Chosen)
	}
	if !slices.ContainsFunc(rep.Quotas, func(q QuotaState) bool { return q.Limit == "acme-day" && q.Subject == "acme" }) {
		t.Errorf("fleet report: quota rows %+v, want acme-day's too", rep.Quotas)
	}
	own, err := h.app.Usage(context.Background(), "initech", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, rep := range map[string]*UsageReport{"fleet": rep, "initech": own} {
		if got := quotaUsed(rep, "team-week", "initech"); got != 1 {
			t.Errorf("%s report: team-week of initech used %d (-1: no row), want 1; quota rows %+v", name, got, rep.Quotas)
		}
	}
}

// A tenant and a user known only from the ledger (their file key removed,
// no limit naming them) keep what their budgets used this period: the
// tenant's own report covers the period and zone of the budgets that
// apply to its callers, not the default month in UTC, and the user keeps
// its user budget's row, in the tenant's report and the fleet's (trial14:
// `usage --tenant initech` reported the month, chosen "default", beside a
// weekly budget's row, and ian's user-week row was gone).
func TestUsageLedgerOnlyTenantFollowsItsBudgets(t *testing.T) {
	const limits = `limits:
  - {name: team-week, scope: tenant, unit: requests, quota: 100, period: week, timezone: Asia/Tokyo}
  - {name: user-week, scope: user, unit: requests, quota: 50, period: week, timezone: Asia/Tokyo}
ledger: {file: %q}
`
	h, path, write, without := startWithFileKeys(t, limits, "  - {key: sk-test-initech, user: ian, tenant: initech}\n")
	if resp, body := h.post("sk-test-initech", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`); resp.StatusCode != 200 {
		t.Fatalf("ian's call: %d %s", resp.StatusCode, body)
	}
	write(without) // initech's last key removed; no limit names it
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"initech", ""} {
		rep, err := h.app.Usage(context.Background(), tenant, "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Period.Name != "week" || rep.Period.Chosen != "budgets" || rep.Period.TimeZone != "Asia/Tokyo" {
			t.Errorf("usage %q: period %s (chosen %q) in %s, want the budgets' week in Asia/Tokyo", tenant, rep.Period.Name, rep.Period.Chosen, rep.Period.TimeZone)
		}
		if rep.Requests != 1 {
			t.Errorf("usage %q: %d requests, want ian's 1", tenant, rep.Requests)
		}
		if got := quotaUsed(rep, "team-week", "initech"); got != 1 {
			t.Errorf("usage %q: team-week of initech used %d (-1: no row), want 1; quota rows %+v", tenant, got, rep.Quotas)
		}
		if got := quotaUsed(rep, "user-week", "ian"); got != 1 {
			t.Errorf("usage %q: user-week of ian used %d (-1: no row), want 1; quota rows %+v", tenant, got, rep.Quotas)
		}
	}
}

// A tenant known only from the ledger whose records this month are older
// than its budgets' day: its report is today's, with its budget's row, and
// its note says the ledger knows it rather than to check its spelling;
// a misspelt tenant is still told to check it.
func TestUsageLedgerOnlyTenantWithOlderRecords(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.jsonl")
	line := `{"ts":"2026-12-10T10:00:00Z","request_id":"r1","key_id":"0123456789abcdef","user":"ian","tenant":"initech","model":"gpt-4o-mini","flavor":"openai","status":200,"input_tokens":8,"output_tokens":16,"cost_micro_usd":11}` + "\n"
	if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`limits:
  - {name: team-day, scope: tenant, unit: requests, quota: 100, period: day}
ledger: {file: %q}
`, file))))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 15, 12, 0, 0, 0, time.UTC)
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	rep, err := h.app.Usage(context.Background(), "initech", "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Period.Name != "day" || rep.Period.Chosen != "budgets" || rep.Requests != 0 {
		t.Errorf("initech: period %s (chosen %q), %d requests; want today (chosen \"budgets\"), none", rep.Period.Name, rep.Period.Chosen, rep.Requests)
	}
	if !slices.ContainsFunc(rep.Quotas, func(q QuotaState) bool { return q.Limit == "team-day" && q.Subject == "initech" }) {
		t.Errorf("initech: quota rows %+v, want team-day of initech", rep.Quotas)
	}
	if !strings.Contains(rep.Note, "not a misspelling") {
		t.Errorf("initech: note %q, want one saying the ledger knows it", rep.Note)
	}
	rep, err = h.app.Usage(context.Background(), "initechh", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Note, "check its spelling") || rep.Period.Chosen != "default" {
		t.Errorf("initechh: note %q, period chosen %q; want the spelling note and the default month", rep.Note, rep.Period.Chosen)
	}
}

// startWithFileKeys starts llmguard on a config file made of baseConfig
// with limits (a format taking the ledger file's path) and the key lines
// keyLines (YAML list items) added to its keys, against a mock upstream of
// its own. It returns the harness, the file's path, a function that
// rewrites the file, and the config without keyLines: written and
// reloaded, it removes those keys.
func startWithFileKeys(t *testing.T, limits, keyLines string) (h *harness, path string, write func(string), without string) {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path = filepath.Join(t.TempDir(), "llmguard.yaml")
	write = func(yaml string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	without = baseConfig(t, mock.URL, fmt.Sprintf(limits, filepath.Join(t.TempDir(), "ledger.jsonl")))
	write(strings.Replace(without, "keys:\n", "keys:\n"+keyLines, 1))
	return startFile(t, mock, path, slog.New(slog.NewTextHandler(io.Discard, nil))), path, write, without
}

// quotaUsed is the units used of rep's quota row of limit and subject, -1
// when rep has no such row.
func quotaUsed(rep *UsageReport, limit, subject string) int64 {
	for _, q := range rep.Quotas {
		if q.Limit == limit && q.Subject == subject {
			return q.Used
		}
	}
	return -1
}
