package app

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// Findings of a README-only new-user trial, each through a real socket on
// the embedded default config (what `llmguard serve` runs without
// --config), its upstreams pointed at a mock.

// devKey is the embedded default config's development key.
const devKey = "sk-llmguard-dev"

// startDefault runs llmguard on the embedded default config, its upstreams
// (the mock's usual 127.0.0.1:8081) replaced by a mock of the test's own.
func startDefault(t *testing.T) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	yaml := bytes.ReplaceAll(config.DefaultYAML, []byte("http://127.0.0.1:8081"), []byte(mock.URL))
	if bytes.Equal(yaml, config.DefaultYAML) {
		t.Fatal("the embedded default config no longer names http://127.0.0.1:8081: update startDefault")
	}
	cfg, err := config.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	return startParsed(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// raw POSTs body to path with the given headers (name, value pairs) and
// nothing else: no credential unless one is given.
func (h *harness) raw(path, body string, headers ...string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(b)
}

// An Azure client on the embedded default config (no azure upstream) gets
// 401 invalid_api_key, as the README says, whether its key is the dev key
// (sent in api-key, which only an azure upstream reads) or a wrong one:
// the caller is authenticated before its path is judged, so that a caller
// without a valid key learns nothing about routing. An authenticated
// caller still gets the path's refusal.
func TestAuthenticatedBeforePathRefusal(t *testing.T) {
	h := startDefault(t)
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	azurePath := "/openai/deployments/chat-prod/chat/completions?api-version=2024-10-21"
	for _, c := range []struct {
		name, path string
		headers    []string
		status     int
		code       string
	}{
		{"azure client, dev key in api-key", azurePath, []string{"api-key", devKey}, 401, "invalid_api_key"},
		{"azure client, wrong key", azurePath, []string{"api-key", "sk-wrong"}, 401, "invalid_api_key"},
		{"wrong bearer key, deployments path", azurePath, []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		{"wrong bearer key, model in the query", "/v1/chat/completions?model=o1-pro", []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		{"no key, engines path", "/v1/engines/o1-pro/chat/completions", nil, 401, "invalid_api_key"},
		{"wrong bearer key, odd path", "/v1/chat%2Fcompletions", []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		// Authenticated: the path's own refusal.
		{"dev key, deployments path", azurePath, []string{"Authorization", "Bearer " + devKey}, 400, "model_outside_body"},
		{"dev key, model in the query", "/v1/chat/completions?model=o1-pro", []string{"Authorization", "Bearer " + devKey}, 400, "model_outside_body"},
	} {
		resp, b := h.raw(c.path, chat, c.headers...)
		if resp.StatusCode != c.status || !strings.Contains(b, `"`+c.code+`"`) {
			t.Errorf("%s: POST %s: %d %.200s, want %d %s", c.name, c.path, resp.StatusCode, b, c.status, c.code)
		}
	}
}

// A request too large for its limit because its estimate reserved hidden
// context (x-llmguard-estimate: partial) is told so, with the setting that
// bounds that reservation, rather than to lower max_tokens or the prompt,
// which would not help: a Responses call continuing a stored response on
// the embedded default (gpt-4o-mini's 128,000-token input reserved under a
// 1,000-token limit), and a Claude call with the web search tool under a
// 100,000-token limit. An exact estimate still gets the old advice.
func TestTooLargeNamesHiddenContextReservation(t *testing.T) {
	h := startDefault(t)
	bearer := []string{"Authorization", "Bearer " + devKey}
	resp, b := h.raw("/v1/responses", `{"model":"gpt-4o-mini","input":"and then?","previous_response_id":"resp_123","max_output_tokens":50}`, bearer...)
	if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-estimate") != "partial" || resp.Header.Get("x-should-retry") != "false" {
		t.Fatalf("responses with previous_response_id: %d (estimate %q, x-should-retry %q) %.300s, want a partial 429 that is not retried",
			resp.StatusCode, resp.Header.Get("x-llmguard-estimate"), resp.Header.Get("x-should-retry"), b)
	}
	code, msg := errorCode(t, "/v1/responses", b)
	for _, want := range []string{"Request too large for limit user-tokens", "x-llmguard-estimate: partial", "previous_response_id",
		"models.gpt-4o-mini.max_input_tokens", "default_max_input_tokens"} {
		if !strings.Contains(msg, want) {
			t.Errorf("hidden-context 429 (%s): message %q lacks %q", code, msg, want)
		}
	}
	if strings.Contains(msg, "shorten the prompt") {
		t.Errorf("hidden-context 429: message %q still advises lowering max_tokens or the prompt", msg)
	}

	resp, b = h.raw("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5000}`, bearer...)
	if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-estimate") != "" {
		t.Fatalf("exact request over the limit: %d (estimate %q) %.300s, want an exact 429", resp.StatusCode, resp.Header.Get("x-llmguard-estimate"), b)
	}
	if _, msg := errorCode(t, "/v1/chat/completions", b); !strings.Contains(msg, "reduce the request: lower max_completion_tokens or max_tokens, or shorten the prompt.") || strings.Contains(msg, "max_input_tokens") {
		t.Errorf("exact request over the limit: message %q, want the advice to reduce the request", msg)
	}
	// Each API's own output field (trial3: a Responses caller was told to
	// lower max_tokens, a field Responses does not take).
	resp, b = h.raw("/v1/responses", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":5000}`, bearer...)
	if _, msg := errorCode(t, "/v1/responses", b); resp.StatusCode != 429 || !strings.Contains(msg, "reduce the request: lower max_output_tokens, or shorten the prompt.") {
		t.Errorf("responses over the limit: %d, message %q, want the advice to lower max_output_tokens", resp.StatusCode, msg)
	}
	resp, b = h.raw("/v1/embeddings", `{"model":"text-embedding-3-small","input":"`+strings.Repeat("word ", 2000)+`"}`, bearer...)
	if _, msg := errorCode(t, "/v1/embeddings", b); resp.StatusCode != 429 || !strings.Contains(msg, "reduce the request's input.") {
		t.Errorf("embeddings over the limit: %d, message %q, want the advice to reduce the input (it has no output)", resp.StatusCode, msg)
	}

	f := startFlavors(t, "")
	resp, b = f.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,`+
		`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"news today?"}]}`)
	if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-estimate") != "partial" {
		t.Fatalf("claude with web_search: %d (estimate %q) %.300s, want a partial 429", resp.StatusCode, resp.Header.Get("x-llmguard-estimate"), b)
	}
	if typ, msg := errorCode(t, "/v1/messages", b); typ != "rate_limit_error" || !strings.Contains(msg, "models.claude-sonnet-4-5.max_input_tokens") ||
		!strings.Contains(msg, "web search") || strings.Contains(msg, "max_tokens or the prompt") {
		t.Errorf("claude with web_search: %s %q, want Anthropic's rate_limit_error naming models.claude-sonnet-4-5.max_input_tokens", typ, msg)
	}
}

// A budget (quota) denial carries retry-after-ms as every other 429 with
// a wait does, for the same instant as Retry-After, alongside
// x-should-retry: false (the SDKs then return the error rather than wait
// out the period).
func TestQuotaDenialCarriesRetryAfterMs(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	clock := &fakeClock{now: time.Date(2027, 2, 10, 12, 0, 0, 250e6, time.UTC)} // 11h59m59.75s before the day ends
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, `
limits:
  - {name: alice-daily, scope: user, unit: tokens, quota: 1000, period: day}
`)))
	if err != nil {
		t.Fatal(err)
	}
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now)
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":600}`
	if resp, b := h.post(testKey, chat, "x-mock-completion-tokens", "600"); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, b)
	}
	resp, b := h.post(testKey, chat)
	if resp.StatusCode != 429 || !strings.Contains(b, "insufficient_quota") || resp.Header.Get("x-should-retry") != "false" {
		t.Fatalf("over the budget: %d (x-should-retry %q) %s", resp.StatusCode, resp.Header.Get("x-should-retry"), b)
	}
	const wantMs = 11*3600_000 + 59*60_000 + 59_750
	if got := resp.Header.Get("retry-after-ms"); got != strconv.Itoa(wantMs) {
		t.Errorf("retry-after-ms %q, want %d (to 00:00 UTC)", got, wantMs)
	}
	if got := resp.Header.Get("Retry-After"); got != strconv.Itoa((wantMs+999)/1000) {
		t.Errorf("Retry-After %q, want %d (the same instant in whole seconds)", got, (wantMs+999)/1000)
	}
}

// An admin_token_env whose variable is unset (or empty) refuses the start,
// `llmguard validate` and a reload, as an unset api_key_env does: /admin/*
// would otherwise answer loopback callers without the token the operator
// meant to require (new-user trial: serve started without a word and
// /admin answered without a token). Set, it starts and /admin/usage wants
// the token.
func TestUnsetAdminTokenEnvRefused(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	const name = "LLMGUARD_TEST_NEWUSER_ADMIN_TOKEN"
	yaml := baseConfig(t, mock.URL, "admin_token_env: "+name+"\n")
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, val := range []string{"unset", ""} {
		if val == "unset" {
			t.Setenv(name, "x") // restored after the test
			os.Unsetenv(name)
		} else {
			t.Setenv(name, val)
		}
		_, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "admin_token_env: "+name+" is not set") {
			t.Errorf("%s %q: start: err %v, want a config error naming admin_token_env and %s", name, val, err, name)
		}
		fs, err := CheckConfig(cfg, os.LookupEnv)
		if err != nil || len(Fatal(fs)) != 1 || Fatal(fs)[0].Field != "admin_token_env" {
			t.Errorf("%s %q: validate: %v, %v; want one fatal finding on admin_token_env", name, val, fs, err)
		}
		if fs, _ := CheckConfig(cfg, nil); len(Fatal(fs)) != 0 {
			t.Errorf("validate --no-env: %v, want no fatal finding", fs)
		}
	}

	// Set: the start passes, and /admin/usage wants the token, loopback
	// or not. A reload to a variable that is unset is refused and the
	// token still applies.
	t.Setenv(name, "s3cret")
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	usage := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, h.admin+"/admin/usage", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := usage(""); got != 401 {
		t.Errorf("/admin/usage from loopback without the token: %d, want 401", got)
	}
	if got := usage("s3cret"); got != 200 {
		t.Errorf("/admin/usage with the token: %d, want 200", got)
	}
	other := strings.Replace(yaml, name, name+"_OTHER", 1)
	if err := os.WriteFile(path, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Reload(path); err == nil || !strings.Contains(err.Error(), name+"_OTHER is not set") {
		t.Errorf("reload to an unset admin_token_env: err %v, want it refused", err)
	}
	if got := usage(""); got != 401 {
		t.Errorf("/admin/usage without the token after the refused reload: %d, want 401", got)
	}
}

// A limit's paths glob that matches no path a rule sees is warned of, as a
// models glob that fits no priced model is (new-user trial:
// paths: ["/v1/chat/completion"] passed validate silently); globs that may
// match an endpoint llmguard forwards are not.
func TestPathGlobMatchingNothingWarns(t *testing.T) {
	for _, c := range []struct {
		glob string
		want string // in the warning; "" for none
	}{
		{"/v1/chat/completion", "did you mean /v1/chat/completions?"},
		{"/v1/embedding", "did you mean /v1/embeddings?"},
		{"/v2/responses", "use /v1/responses"}, // a request to it is still weighed as responses
		{"/v1/Chat/Completions", "lowercase"},
		{"/v1/chat/completions/", "trailing"},
		{"v1/chat/completions", "starting with /"},
		{"/chat/completions", "use /v1/chat/completions"},
		{"/openai/deployments/*/chat/completions", "use /v1/chat/completions"},
		{"/openai/v1/responses", "use /v1/responses"},
		// May match: no warning.
		{"/v1/chat/completions", ""},
		{"/v1/*", ""},
		{"/v1/chat/*", ""},
		{"/v1/messages", ""},
		{"/v1/messages/count_tokens", ""},
		{"/v1/messages/batches", ""},
		{"/v1/responses/input_tokens", ""},
		{"/v1/chat/completions/*", ""},
		{"/v1/images/*", ""},
		{"/v1/audio/speech", ""},
		{"/v1/moderations", ""},
		{"/api/chat", ""},
		{"/v1/[a-z]*", ""},
	} {
		got := unknownPathGlob(c.glob)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%q: warning %q, want one containing %q", c.glob, got, c.want)
		}
	}

	// Through validate's check, on the trial's config: a warning, not an
	// error, on the field.
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", `
limits:
  - {name: chat-rpm, scope: user, unit: requests, rate: 60, per: 1m, paths: ["/v1/chat/completion", "/v1/embeddings"]}
`)))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := CheckConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found []Finding
	for _, f := range fs {
		if strings.Contains(f.Field, ".paths[") {
			found = append(found, f)
		}
	}
	if len(found) != 1 || found[0].Fatal || found[0].Field != "limits[0].paths[0]" || !strings.Contains(found[0].Message, "did you mean /v1/chat/completions?") {
		t.Errorf("findings on paths: %v, want one warning on limits[0].paths[0] suggesting /v1/chat/completions", found)
	}
}

// A USD rule's refusals give dollars, to the micro-dollar, not micro-USD
// counts (trial3: "34296 of 50000 micro-USD used" had to be converted to
// be checked against a budget set in dollars): the budget's used and
// total, the reservation, and a request too large for it.
func TestUSDRefusalsInDollars(t *testing.T) {
	h := start(t, `
limits:
  - {name: alice-usd, scope: user, unit: usd, quota: 0.0005, period: day}
`)
	chat := func(maxTokens int) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":` + strconv.Itoa(maxTokens) + `}`
	}
	if resp, b := h.post(testKey, chat(600), "x-mock-completion-tokens", "600"); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, b)
	}
	// 8 input tokens at $0.15 and 600 output at $0.60 per million: 362
	// micro-USD spent (1.2 and 360, rounded up); the next reserves as much.
	resp, b := h.post(testKey, chat(600))
	if want := "$0.000362 of $0.000500 used, and this request reserves $0.000362"; resp.StatusCode != 429 || !strings.Contains(b, want) || strings.Contains(b, "micro-USD") {
		t.Errorf("over the budget: %d %s, want %q", resp.StatusCode, b, want)
	}
	resp, b = h.post(testKey, chat(2000))
	if want := "requested $0.001202, but the limit holds at most $0.000500"; resp.StatusCode != 429 || !strings.Contains(b, want) {
		t.Errorf("too large: %d %s, want %q", resp.StatusCode, b, want)
	}
}

// A models entry that misspells a priced model (new-user trial: `models:
// [gpt4o]` on a usd limit) is warned of with the name it most likely
// stands for, the nearest priced one, not only as fitting nothing; a glob,
// or a name far from every priced one, gets no guess.
func TestModelTypoNamesTheNearestPricedModel(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", `
limits:
  - {name: usd, scope: user, unit: usd, rate: 1, per: 1m, models: [gpt4o, claude-sonet-4-5, "gpt-9*", zzzz-unknown-model]}
`)))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := CheckConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fs {
		if strings.Contains(f.Field, ".models[") {
			got[f.Field] = f.Message
		}
	}
	for field, want := range map[string]string{
		"limits[0].models[0]": "(did you mean gpt-4o?)",
		"limits[0].models[1]": "(did you mean claude-sonnet-4-5?)",
		"limits[0].models[2]": "",
		"limits[0].models[3]": "",
	} {
		msg, ok := got[field]
		switch {
		case !ok:
			t.Errorf("%s: no warning (all: %v)", field, got)
		case want == "" && strings.Contains(msg, "did you mean"):
			t.Errorf("%s: %q guesses a name", field, msg)
		case want != "" && !strings.Contains(msg, want):
			t.Errorf("%s: %q, want it to contain %q", field, msg, want)
		}
	}
}
