package app

// Adversarial tests of adv51 (2026-12-07): the leftovers of adv49 and
// adv50 on a gateway's own bill, driven through loopback sockets to an
// upstream the test sets.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// adv51CostConfig is the config of adv51ReportedCost beyond twoFlavorHead:
// capped-mini at gpt-4o-mini's price with a window of 100,000 + 16,000
// tokens, so that a chat request's usage ceiling (weigher.Ceiling) is
// 116,000 input and 116,000 output tokens (17,400 + 69,600 µUSD at its
// price), 1,000 web and 1,000 file searches ($10 and $2.50) and 6.54M
// image tokens ($261.60): 274,187,000 µUSD; audio let through under
// dollar limits.
const adv51CostConfig = `
  capped-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, max_input_tokens: 100000, max_output_tokens: 16000}
unmetered_paths: ["/v1/audio/*"]
`

// adv51USDLimit is alice's dollar bucket, $10,000, refilled at 1 µUSD a day.
const adv51USDLimit = `  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 10000}`

// adv51ReportedCost is what alice's dollar bucket (adv51USDLimit) lost
// and what her ledger records of one call of body to path whose upstream
// answers status with answer (JSON) and the extra header lines fields,
// under reported_cost_ceiling_usd ceiling.
func adv51ReportedCost(t *testing.T, ceiling string, status int, fields, answer, method, path, body string) (lost int64, recs []ledger.Record) {
	t.Helper()
	url := startRawUpstream(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", status, fields, len(answer), answer)
	})
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + adv51CostConfig + "reported_cost_ceiling_usd: " + ceiling + "\nlimits:\n" + adv51USDLimit + "\n" + fmt.Sprintf("ledger: {file: %q}\n", file)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	before := h.probe()
	req, _ := http.NewRequest(method, h.url+path, nil)
	if body != "" {
		req, _ = http.NewRequest(method, h.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	after := h.probe()
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if recs, err = ledger.ReadFiles(file); err != nil {
		t.Fatal(err)
	}
	return rateLimitRemaining(t, before, "user-usd") - rateLimitRemaining(t, after, "user-usd"), recs
}

// A LiteLLM cost header (or an OpenRouter usage.cost) was charged up to
// $10^12 on a weighed request
// (one answer could put a dollar budget a billion dollars into debt, where
// a usage's token figures are cut to the request's ceiling), and not read
// at all on an endpoint llmguard does not weigh (an unmetered path let
// through, whose dollar rules LiteLLM's bill is the only price of). A
// reported cost is now charged on every call that may spend (not a read
// nor a free endpoint), at most the larger of reported_cost_ceiling_usd
// and the request's usage ceiling at the table's price; above it the
// ledger marks the record implausible with the figure reported.
func TestAdv51ReportedCostIsBounded(t *testing.T) {
	const chatBody = `{"model":"capped-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`
	const answer = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}}`
	const costly = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13,"cost":1e300}}`
	const errorBody = `{"error":{"message":"upstream failed","type":"server_error"}}`
	const imageBody = `{"model":"dall-e-3","prompt":"a cat","quality":"hd","size":"1024x1024","n":1}`
	const image = `{"created":1,"data":[{"url":"https://example.com/cat.png"}]}`
	const speechBody = `{"model":"tts-1","input":"hello","voice":"alloy"}`
	const huge = "x-litellm-response-cost: 1e300\r\n"
	const hugeMicro = 1_000_000_000_000 * 1_000_000 // $10^12, the header's own bound
	const tokenCeiling = 274_187_000                // adv51CostConfig
	for _, tc := range []struct {
		name, ceiling      string
		status             int
		fields, answer     string
		method, path, body string
		lost               int64 // micro-USD the dollar bucket must lose
		implausible        bool
	}{
		{"chat: a huge header, the configured bound above the token ceiling's price", "500", 200, huge, answer, "POST", "/v1/chat/completions", chatBody, 500_000_000, true},
		{"chat: a huge header, the token ceiling's price above the configured bound", "0.01", 200, huge, answer, "POST", "/v1/chat/completions", chatBody, tokenCeiling, true},
		{"chat: a huge OpenRouter usage.cost", "500", 200, "", costly, "POST", "/v1/chat/completions", chatBody, 500_000_000, true},
		{"chat: a header within the bound is charged whole", "2", 200, "x-litellm-response-cost: 1.5\r\n", answer, "POST", "/v1/chat/completions", chatBody, 1_500_000, false},
		{"chat: an error with a huge header", "500", 500, huge, errorBody, "POST", "/v1/chat/completions", chatBody, 500_000_000, true},
		{"per image: a huge header", "2", 200, huge, image, "POST", "/v1/images/generations", imageBody, 2_000_000, true},
		{"unmetered path: the header is charged", "2", 200, "x-litellm-response-cost: 0.25\r\n", `{}`, "POST", "/v1/audio/speech", speechBody, 250_000, false},
		{"unmetered path: no header, nothing charged (the hold given back)", "2", 200, "", `{}`, "POST", "/v1/audio/speech", speechBody, 0, false},
		{"unmetered path: a huge header", "2", 200, huge, `{}`, "POST", "/v1/audio/speech", speechBody, 2_000_000, true},
		{"unmetered path: an error it says was billed", "2", 500, "x-litellm-response-cost: 0.25\r\n", errorBody, "POST", "/v1/audio/speech", speechBody, 250_000, false},
		{"a free endpoint is not a bill", "2", 200, huge, `{"id":"m","results":[]}`, "POST", "/v1/moderations", `{"input":"hi"}`, 0, false},
		{"a read is not a bill", "2", 200, huge, `{"object":"list","data":[]}`, "GET", "/v1/files", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, recs := adv51ReportedCost(t, tc.ceiling, tc.status, tc.fields, tc.answer, tc.method, tc.path, tc.body)
			var recorded, reported int64
			implausible := false
			for _, r := range recs {
				recorded += r.CostMicroUSD // the probes cost nothing
				reported += r.ReportedCostMicroUSD
				implausible = implausible || r.UsageImplausible
			}
			t.Logf("charged %d µUSD, recorded %d µUSD, reported %d µUSD", lost, recorded, reported)
			if lost != tc.lost {
				t.Errorf("the dollar bucket lost %d µUSD, want %d", lost, tc.lost)
			}
			if recorded != tc.lost {
				t.Errorf("the ledger records %d µUSD, want %d", recorded, tc.lost)
			}
			if implausible != tc.implausible {
				t.Errorf("usage_implausible %v, want %v", implausible, tc.implausible)
			}
			if want := int64(0); tc.implausible {
				if reported != hugeMicro {
					t.Errorf("reported_cost_micro_usd %d, want the header's %d", reported, hugeMicro)
				}
			} else if reported != want {
				t.Errorf("reported_cost_micro_usd %d, want 0", reported)
			}
		})
	}
}

// adv51AccessErrors is llmguard_access_log_errors_total as h's /metrics
// reads now.
func adv51AccessErrors(t *testing.T, h *harness) float64 {
	t.Helper()
	for line := range strings.Lines(h.metrics()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "llmguard_access_log_errors_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("llmguard_access_log_errors_total %q: %v", v, err)
			}
			return f
		}
	}
	t.Fatal("no llmguard_access_log_errors_total on /metrics")
	return 0
}

// An access log that stopped taking lines (its file replaced by a
// directory, as a full disk or a broken mount would fail it) was only
// counted in llmguard_access_log_errors_total: the process log said
// nothing. It now says so in one ERROR line per minute of the process's
// clock (frozen here: one line, however many requests), and the counter
// still counts every lost line.
func TestAdv51AccessLogFailureIsLoggedOnce(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := obsConfig(t, mock.URL, "access_log: {enabled: true, output: "+path+"}\n")
	logs := &syncBuffer{}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), func() time.Time { return frozen })
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	const lost = "access log: a line could not be written"
	if resp, text := h.post(obsKey, chatBody(false, 20), "x-mock-completion-tokens", "7"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, text)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	// The file is looked for again a second after the last look
	// (obs.followEvery, on the wall clock): send until a line is lost.
	sent := 0
	for ; adv51AccessErrors(t, h) == 0; sent++ {
		if sent == 400 {
			t.Fatal("no access-log line lost after 400 requests")
		}
		h.post(obsKey, chatBody(false, 20), "x-mock-completion-tokens", "7")
		time.Sleep(10 * time.Millisecond)
	}
	before := adv51AccessErrors(t, h)
	const more = 20
	for range more {
		if resp, text := h.post(obsKey, chatBody(false, 20), "x-mock-completion-tokens", "7"); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, text)
		}
	}
	for i := 0; adv51AccessErrors(t, h) < before+more; i++ { // lines are written once settled, just after the answer
		if i == 500 {
			t.Fatalf("llmguard_access_log_errors_total %v, want at least %v", adv51AccessErrors(t, h), before+more)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := strings.Count(logs.String(), lost)
	t.Logf("%d requests before the first loss, %v lines lost, %d log lines", sent, adv51AccessErrors(t, h), n)
	if n != 1 {
		t.Errorf("%d %q lines in the process log, want 1 (the first failure, then one a minute):\n%s", n, lost, logs.String())
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the line is not at ERROR:\n%s", logs.String())
	}
}

// A call to a path unmetered_paths lets through reserved nothing on a
// dollar rule, and a take of nothing always passes: once its gateway's
// reported costs put the budget into debt, the caller went on calling, each
// call charged more debt. It now holds one micro-dollar at admission, so a
// spent budget refuses it, and settles at what its gateway billed (the hold
// given back; nothing when it says nothing).
func TestAdv51UnmeteredCallStopsAtASpentBudget(t *testing.T) {
	const speechBody = `{"model":"tts-1","input":"hello","voice":"alloy"}`
	fields := "x-litellm-response-cost: 0.6\r\n"
	url := startRawUpstream(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: 2\r\n\r\n{}", fields)
	})
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + adv51CostConfig + "limits:\n" +
		"  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	statuses := make([]int, 0, 4)
	for range 4 {
		resp, _ := h.do("/v1/audio/speech", speechBody)
		statuses = append(statuses, resp.StatusCode)
	}
	// $0.60 a call of a $1 budget: the second call puts it $0.20 into debt,
	// the third finds it spent.
	if fmt.Sprint(statuses) != "[200 200 429 429]" {
		t.Errorf("statuses %v, want [200 200 429 429]", statuses)
	}
}
