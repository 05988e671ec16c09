package app

// Adversarial tests for issue 12 ("every token and dollar is counted"),
// from the second review: each drives llmguard through real loopback
// sockets to an upstream that bills what it reads, and fails where the
// upstream billed more than llmguard admitted. (The review's tests of
// uncapped output, still open, are not here.)

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/ledger"
)

// billingUpstream bills like a real provider: every POST it serves costs
// its input (a quarter of the body's bytes) plus its output (max_tokens as
// encoding/json reads it, case-insensitively; noMax when there is none, as
// a model with no cap runs to its own limit). Built-in tools that pull
// content into the context (web search, file search, MCP, web fetch) add
// toolInput input tokens, as OpenAI and Anthropic bill search results as
// input. Like Tomcat/Spring, it drops ";params" from path segments.
// Weighed endpoints report their usage; the others bill silently.
type billingUpstream struct {
	url              string
	noMax, toolInput int64
	delay            time.Duration
	reported, silent atomic.Int64
	paths            sync.Map // path -> count
}

func startBilling(t *testing.T, noMax, toolInput int64) *billingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &billingUpstream{url: "http://" + ln.Addr().String(), noMax: noMax, toolInput: toolInput}
	srv := &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

var builtInTools = []string{"web_search", "file_search", "mcp", "web_fetch", "code_execution"}

func (u *billingUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	time.Sleep(u.delay)
	// Tomcat-style: path parameters dropped from every segment.
	segs := strings.Split(r.URL.Path, "/")
	for i, s := range segs {
		if j := strings.IndexByte(s, ';'); j >= 0 {
			segs[i] = s[:j]
		}
	}
	path := strings.ToLower(strings.Join(segs, "/"))
	n, _ := u.paths.LoadOrStore(path, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	var b struct {
		Model               string          `json:"model"`
		MaxTokens           float64         `json:"max_tokens"`
		MaxCompletionTokens float64         `json:"max_completion_tokens"`
		MaxOutputTokens     float64         `json:"max_output_tokens"`
		Tools               json.RawMessage `json:"tools"`
		WebSearchOptions    json.RawMessage `json:"web_search_options"`
		MCPServers          json.RawMessage `json:"mcp_servers"`
	}
	json.Unmarshal(body, &b)
	in := int64(len(body)/4 + 1)
	for _, tool := range builtInTools {
		if bytes.Contains(b.Tools, []byte(`"`+tool)) {
			in += u.toolInput
			break
		}
	}
	if len(b.WebSearchOptions) > 0 || len(b.MCPServers) > 2 {
		in += u.toolInput
	}
	out := int64(max(b.MaxTokens, b.MaxCompletionTokens, b.MaxOutputTokens))
	if out <= 0 {
		out = u.noMax
	}
	if writeBilled(w, path, b.Model, in, out) {
		u.reported.Add(in + out)
	} else {
		u.silent.Add(in + out)
	}
}

// advStart runs llmguard (clock frozen) before up with tail appended to
// the base config.
func advStart(t *testing.T, upURL, tail string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(baseConfig(t, upURL, tail)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
}

func advPost(t *testing.T, url, path string, body []byte, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// 1. POST paths an upstream serves and bills, that Classify calls "other":
// a caller under a 1,000-token bucket gets them all through as one request.
func TestAdv12BilledPathsClassifiedOther(t *testing.T) {
	up := startBilling(t, 1000, 0)
	h := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`)
	big := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"prompt":"hi","max_tokens":100000}`)
	paths := []string{
		"/v1/chat/completions;x=1",              // Tomcat/Spring/Jetty drop ;params: chat
		"/v1/chat;x/completions",                // same, mid-path
		"/v1/images;x/generations",              // unmetered family behind a ;param
		"/v1/openai/images/generations",         // DeepInfra's API root (/v1/openai)
		"/v1/openai/batches",                    // same root, batches
		"/api/v1/audio/speech",                  // an /api/v1 root
		"/api/chat",                             // Ollama native chat
		"/api/generate",                         // Ollama native generate
		"/generate",                             // TGI native
		"/v1/rerank",                            // vLLM, LiteLLM, Together, Jina rerank (billed per token)
		"/v1beta/models/gemini:generateContent", // Gemini native
		"/v1/images%2Fgenerations",
		"/v1/chat/completions.",
		"/v1/chat/completions%20",
	}
	for _, p := range paths {
		resp, body := advPost(t, h.url, p, big)
		t.Logf("%-42s -> %d %s", p, resp.StatusCode, strings.TrimSpace(body)[:min(60, len(strings.TrimSpace(body)))])
		if resp.StatusCode == 200 {
			t.Errorf("POST %s with max_tokens 100000 under a 1000-token bucket: 200 (counted as one request)", p)
		}
	}
	if s := up.silent.Load() + up.reported.Load(); s > 1000 {
		t.Errorf("the upstream billed %d tokens through a 1000-token bucket", s)
	}
}

// 2. A model-scoped rule is matched on the name as sent, so a dated
// snapshot (priced as the model, served by the provider) or an operator's
// alias escapes a rule written for the model.
func TestAdv12ModelRuleEscapedBySnapshotOrAlias(t *testing.T) {
	up := startBilling(t, 1000, 0)
	h := advStart(t, up.url, `  openai/gpt-5-pro: {alias_of: gpt-5-pro}
limits:
  - {name: pro-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, models: ["gpt-5-pro"]}
  - {name: pro-tpm-per-model, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, models: ["gpt-5-pro"], per_model: true}
`)
	for _, model := range []string{"gpt-5-pro", "gpt-5-pro-2025-10-06", "openai/gpt-5-pro"} {
		body := fmt.Sprintf(`{"model":%q,"input":"hi","max_output_tokens":100000}`, model)
		resp, b := advPost(t, h.url, "/v1/responses", []byte(body))
		t.Logf("%-22s -> %d %s", model, resp.StatusCode, b[:min(80, len(b))])
		if resp.StatusCode == 200 {
			t.Errorf("model %q: 200 with max_output_tokens 100000 past a 1000-token rule on gpt-5-pro", model)
		}
	}
	if b := up.reported.Load(); b > 1000 {
		t.Errorf("the upstream billed %d gpt-5-pro tokens through a 1000-token rule", b)
	}
}

// 3. service_tier spellings other than the exact lowercase enum are priced
// in default_service_tier (standard), half of gpt-5's priority price.
func TestAdv12ServiceTierSpellings(t *testing.T) {
	up := startBilling(t, 1000, 0)
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := advStart(t, up.url, fmt.Sprintf(`limits:
  - {name: user-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 1000}
ledger: {file: %q}
`, file))
	tiers := []string{"priority", "Priority", "PRIORITY", " priority", "priority\n"}
	for _, tier := range tiers {
		body := fmt.Sprintf(`{"model":"gpt-5","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":1000,"service_tier":%q}`, tier)
		resp, _ := advPost(t, h.url, "/v1/chat/completions", []byte(body))
		if resp.StatusCode != 200 {
			t.Fatalf("tier %q: %d", tier, resp.StatusCode)
		}
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	for i, r := range recs {
		if i == 0 {
			first = r.CostMicroUSD
		}
		t.Logf("record %d: %d in / %d out -> %d µUSD", i, r.InputTokens, r.OutputTokens, r.CostMicroUSD)
		if r.CostMicroUSD < first {
			t.Errorf("service_tier %q priced %d µUSD, \"priority\" %d µUSD", tiers[i], r.CostMicroUSD, first)
		}
	}
}

// 4. Built-in tools pull content into the context the body does not hold
// (search results, fetched pages, MCP tool lists are billed as input) yet
// are not hidden context: 20 in parallel, each reserving ~100 tokens,
// are admitted against a bucket that cannot pay for one.
func TestAdv12BuiltInToolsAreHiddenContext(t *testing.T) {
	up := startBilling(t, 1000, 50_000)
	up.delay = 300 * time.Millisecond
	type call struct{ path, body string }
	calls := []call{
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"latest news","max_output_tokens":10,"tools":[{"type":"web_search"}]}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"what do my docs say","max_output_tokens":10,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"use the server","max_output_tokens":10,"tools":[{"type":"mcp","server_label":"x","server_url":"https://x"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"news"}],"max_tokens":10,"web_search_options":{}}`},
	}
	for _, c := range calls {
		h := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)
		resp, _ := advPost(t, h.url, c.path, []byte(c.body))
		if resp.Header.Get("x-llmguard-estimate") != "partial" {
			t.Errorf("%s %s: status %d, not flagged partial (hidden context not reserved)", c.path, c.body[:min(120, len(c.body))], resp.StatusCode)
		}
	}
	// Fresh bucket, 20 web searches at once.
	h2 := advStart(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)
	before := up.reported.Load()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, h2.url+"/v1/responses", strings.NewReader(calls[0].body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if billed := up.reported.Load() - before; billed > 20000 {
		t.Errorf("20 web_search calls at once: %d admitted, the upstream billed %d tokens through a 20000-token bucket", ok.Load(), billed)
	}
}

// 4b. The same for Anthropic's server tools (web_search, web_fetch) and
// the MCP connector (mcp_servers).
func TestAdv12AnthropicServerTools(t *testing.T) {
	up := startBilling(t, 1000, 50_000)
	t.Setenv("LLMGUARD_TEST_UPSTREAM_KEY", "sk-upstream")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
max_body_bytes: 65536
upstreams:
  - {name: claude, flavor: anthropic, base_url: %q, no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme, plan: free}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`, up.url, testKey)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	bodies := []string{
		`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"news"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"read https://x"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"go"}],"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`,
	}
	for _, b := range bodies {
		resp, _ := advPost(t, h.url, "/v1/messages", []byte(b), "x-api-key", testKey, "anthropic-version", "2023-06-01")
		if resp.Header.Get("x-llmguard-estimate") != "partial" {
			t.Errorf("%s: status %d, not flagged partial", b[60:min(160, len(b))], resp.StatusCode)
		}
	}
	if billed := up.reported.Load(); billed > 20000 {
		t.Errorf("3 calls with server tools: the upstream billed %d tokens through a 20000-token bucket", billed)
	}
}
