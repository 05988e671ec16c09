package app

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// startFlavors runs llmguard with an OpenAI and an Anthropic upstream (both
// the mock) and a slow 10,000-token bucket plus the given extra limits.
func startFlavors(t *testing.T, extraLimits string) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	return startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, cached_input_usd_per_mtok: 0.075, output_usd_per_mtok: 0.60}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, cached_input_usd_per_mtok: 0.3, cache_write_usd_per_mtok: 3.75, output_usd_per_mtok: 15, default_max_output_tokens: 100}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
%[3]s`, mock.URL, testKey, extraLimits))
}

// do sends a request to path with the test key in the header the flavor
// uses and returns the response and body.
func (h *harness) do(path, body string, headers ...string) (*http.Response, string) {
	h.t.Helper()
	return h.send(path, []byte(body), headers...)
}

// probe is the headers of a requests-only call (GET /v1/models with the
// test key), which costs no token and no dollar: the state of every bucket.
func (h *harness) probe() http.Header {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header
}

// tokensLeft is what the tightest token bucket holds, read from a probe.
func (h *harness) tokensLeft() int64 {
	h.t.Helper()
	return remainingTokens(h.t, h.probe())
}

func intField(t *testing.T, body, field string) int64 {
	t.Helper()
	i := strings.Index(body, `"`+field+`":`)
	if i < 0 {
		t.Fatalf("no %s in %s", field, body)
	}
	rest := body[i+len(field)+3:]
	j := strings.IndexAny(rest, ",}")
	n, err := strconv.ParseInt(strings.TrimSpace(rest[:j]), 10, 64)
	if err != nil {
		t.Fatalf("%s in %s: %v", field, body, err)
	}
	return n
}

// Each flavor's JSON answer is reconciled to the usage it reports.
func TestEveryFlavorReconcilesJSONUsage(t *testing.T) {
	h := startFlavors(t, "")
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		usage            func(body string) int64 // tokens the upstream reports
	}{
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"Tell me a story.","max_output_tokens":500}`,
			[]string{"x-mock-completion-tokens", "20", "x-mock-reasoning-tokens", "7"},
			func(b string) int64 { return intField(t, b, "input_tokens") + intField(t, b, "output_tokens") }},
		{"completions", "/v1/completions", `{"model":"gpt-4o-mini","prompt":["one","two"],"max_tokens":300}`,
			[]string{"x-mock-completion-tokens", "9"},
			func(b string) int64 { return intField(t, b, "total_tokens") }},
		{"embeddings", "/v1/embeddings", `{"model":"text-embedding-3-small","input":["a b c","d e"]}`, nil,
			func(b string) int64 { return intField(t, b, "total_tokens") }},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":400,"system":"Be brief.","messages":[{"role":"user","content":"Hi there"}]}`,
			[]string{"x-mock-completion-tokens", "12", "x-mock-cache-read", "3", "x-mock-cache-write", "2"},
			func(b string) int64 {
				return intField(t, b, "input_tokens") + intField(t, b, "cache_creation_input_tokens") +
					intField(t, b, "cache_read_input_tokens") + intField(t, b, "output_tokens")
			}},
	} {
		before := h.tokensLeft()
		resp, body := h.do(tc.path, tc.body, tc.headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		if got, want := before-h.tokensLeft(), tc.usage(body); got != want {
			t.Errorf("%s: charged %d tokens, the upstream reported %d", tc.name, got, want)
		}
	}
}

// Each flavor's stream is reconciled to its usage: Anthropic's cumulative
// message_delta counts once (the last value), never summed.
func TestEveryFlavorReconcilesStreamUsage(t *testing.T) {
	h := startFlavors(t, "")
	for _, tc := range []struct {
		name, path, body string
		headers          []string
	}{
		{name: "chat", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "11"}},
		{name: "responses", path: "/v1/responses", body: `{"model":"gpt-4o-mini","input":"Tell me a story.","max_output_tokens":500,"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "13", "x-mock-reasoning-tokens", "5"}},
		{name: "completions", path: "/v1/completions", body: `{"model":"gpt-4o-mini","prompt":"Once","max_tokens":100,"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "6"}},
		{name: "messages, split deltas", path: "/v1/messages", body: `{"model":"claude-sonnet-4-5","max_tokens":400,"messages":[{"role":"user","content":"Hi there"}],"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "14", "x-mock-split-delta", "1"}},
		{name: "chat, CRLF", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "4", "x-mock-sse-crlf", "1"}},
		{name: "messages, gzip", path: "/v1/messages", body: `{"model":"claude-sonnet-4-5","max_tokens":400,"messages":[{"role":"user","content":"Hi there"}],"stream":true}`,
			headers: []string{"x-mock-completion-tokens", "8", "x-mock-gzip", "1"}},
	} {
		// The same request without streaming says what the usage is.
		plain := strings.Replace(tc.body, `,"stream":true`, "", 1)
		plainHeaders := []string{}
		for i := 0; i+1 < len(tc.headers); i += 2 {
			if tc.headers[i] != "x-mock-gzip" && tc.headers[i] != "x-mock-sse-crlf" && tc.headers[i] != "x-mock-split-delta" {
				plainHeaders = append(plainHeaders, tc.headers[i], tc.headers[i+1])
			}
		}
		before := h.tokensLeft()
		_, pb := h.do(tc.path, plain, plainHeaders...)
		want := before - h.tokensLeft()
		if want <= 0 {
			t.Fatalf("%s: the unstreamed request charged %d tokens (%.200s)", tc.name, want, pb)
		}
		t.Logf("%s: %d tokens", tc.name, want)

		before = h.tokensLeft()
		resp, body := h.do(tc.path, tc.body, tc.headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		if ce := resp.Header.Get("Content-Encoding"); ce != "" {
			t.Errorf("%s: client got Content-Encoding %q with a decoded stream", tc.name, ce)
		}
		if !strings.Contains(body, "data:") {
			t.Errorf("%s: client got no SSE: %.200s", tc.name, body)
		}
		if got := before - h.tokensLeft(); got != want {
			t.Errorf("%s: stream charged %d tokens, the same request unstreamed %d (%.120s)", tc.name, got, want, pb)
		}
	}
}

// In-band errors and broken streams settle as the README's table says.
func TestInBandErrorsAndBrokenStreams(t *testing.T) {
	h := startFlavors(t, "")
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`
	const resp = `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"stream":true}`
	const msgs = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		check            func(charged int64) bool
		want             string
	}{
		{"chat error before output: refund", "/v1/chat/completions", chat, []string{"x-mock-stream-error", "after=0"},
			func(c int64) bool { return c == 0 }, "0"},
		{"chat error after 3 words: input + 3", "/v1/chat/completions", chat, []string{"x-mock-stream-error", "after=3"},
			func(c int64) bool { return c == hiInput+3 }, "input + 3"},
		{"anthropic error after 2 words: reported input + 2", "/v1/messages", msgs, []string{"x-mock-stream-error", "after=2"},
			func(c int64) bool { return c > 2 && c < 100 }, "input + 2"},
		{"responses failed with usage: the usage", "/v1/responses", resp, []string{"x-mock-stream-error", "after=4", "x-mock-error-usage", "1"},
			func(c int64) bool { return c > 4 && c < 100 }, "reported usage"},
		// The upstream broke the stream off: the provider may have
		// generated more than it showed (until 2026-12-04: input + 5).
		{"chat stream cut after 5: input + the output reservation", "/v1/chat/completions", chat, []string{"x-mock-stream-cut", "5"},
			func(c int64) bool { return c == hiInput+100 }, "input + 100"},
		{"chat stream without usage: input + counted", "/v1/chat/completions", chat, []string{"x-mock-no-usage", "1", "x-mock-completion-tokens", "7"},
			func(c int64) bool { return c == hiInput+7 }, "input + 7"},
	} {
		before := h.tokensLeft()
		h.do(tc.path, tc.body, tc.headers...)
		var charged int64
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			charged = before - h.tokensLeft()
			if tc.check(charged) || time.Now().After(deadline) {
				break
			}
		}
		if !tc.check(charged) {
			t.Errorf("%s: charged %d tokens, want %s", tc.name, charged, tc.want)
		}
	}
}

func TestAnthropicCallerContract(t *testing.T) {
	h := startFlavors(t, `  - {name: claude-rpm, scope: user, unit: requests, rate: 1, per: 1h, burst: 1, models: ["claude-*"]}`)
	body := `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	resp, _ := h.do("/v1/messages", body)
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	for _, k := range []string{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset",
		"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"} {
		if resp.Header.Get(k) == "" {
			t.Errorf("missing %s", k)
		}
	}
	if _, err := time.Parse(time.RFC3339, resp.Header.Get("anthropic-ratelimit-requests-reset")); err != nil {
		t.Errorf("reset is not RFC 3339: %v", err)
	}
	if resp.Header.Get("x-ratelimit-remaining-tokens") != "" {
		t.Error("an Anthropic caller got OpenAI's x-ratelimit headers")
	}
	resp, b := h.do("/v1/messages", body)
	if resp.StatusCode != 429 || !strings.HasPrefix(b, `{"type":"error","error":{"type":"rate_limit_error"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("retry-after")); ra < 3000 {
		t.Errorf("retry-after = %q, want about an hour", resp.Header.Get("retry-after"))
	}
	// count_tokens is forwarded and counts as a request only.
	before := h.tokensLeft()
	resp, b = h.do("/v1/messages/count_tokens", `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(b, "input_tokens") {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	if h.tokensLeft() != before {
		t.Error("count_tokens was charged tokens")
	}
}

func TestServerContextIsAPartialEstimate(t *testing.T) {
	h := startFlavors(t, "")
	resp, _ := h.do("/v1/responses", `{"model":"gpt-4o-mini","previous_response_id":"resp_123","input":"and then?","max_output_tokens":50}`)
	if resp.Header.Get("x-llmguard-estimate") != "partial" {
		t.Errorf("x-llmguard-estimate = %q, want partial for a request with server-side context", resp.Header.Get("x-llmguard-estimate"))
	}
	resp, _ = h.do("/v1/responses", `{"model":"gpt-4o-mini","input":"hello","max_output_tokens":50}`)
	if resp.Header.Get("x-llmguard-estimate") != "" {
		t.Error("a self-contained request marked partial")
	}
}
