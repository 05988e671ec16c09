//go:build !nativetest

package app

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// client is an OpenAI SDK client pointed at llmguard, as an app would do it:
// only the base URL and the (virtual) key change.
func (h *harness) client(key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(h.url + "/v1/"),
		option.WithAPIKey(key),
		option.WithRequestTimeout(10 * time.Second),
	}, opts...)...)
}

func chatParams(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about token buckets.")},
		MaxTokens: openai.Int(maxTokens),
	}
}

func TestSDKNonStreaming(t *testing.T) {
	h := start(t, slowTPM)
	c := h.client(testKey)
	var raw *http.Response
	got, err := c.Chat.Completions.New(context.Background(), chatParams(100), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != " The quick brown fox jumps over the lazy dog. The quick brown fox jumps over" {
		t.Errorf("content = %q", got.Choices[0].Message.Content)
	}
	if got.Usage.CompletionTokens != 16 || got.Usage.PromptTokens == 0 {
		t.Errorf("usage = %+v", got.Usage)
	}
	// The upstream saw the upstream key, never the virtual key.
	hdr, _ := h.mock.LastRequest()
	if a := string(hdr.Peek("Authorization")); a != "Bearer sk-upstream" {
		t.Errorf("upstream Authorization = %q, want the upstream key", a)
	}
	// Headers computed at admission: capacity − (input + 100 reserved).
	if r := remainingTokens(t, raw.Header); r != 10000-got.Usage.PromptTokens-100 {
		t.Errorf("remaining = %d, want %d", r, 10000-got.Usage.PromptTokens-100)
	}
	if p := raw.Header.Get("RateLimit-Policy"); p != `"user-tpm";q=10000;w=864000000;llmguard-unit="tokens"` {
		t.Errorf("RateLimit-Policy = %q", p)
	}
	if !strings.HasPrefix(raw.Header.Get("RateLimit"), `"user-tpm";r=`) {
		t.Errorf("RateLimit = %q", raw.Header.Get("RateLimit"))
	}
}

func TestSDKStreaming(t *testing.T) {
	h := start(t, slowTPM)
	c := h.client(testKey)
	for _, includeUsage := range []bool{false, true} {
		p := chatParams(5)
		if includeUsage {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		s := c.Chat.Completions.NewStreaming(context.Background(), p)
		var text strings.Builder
		var usageChunks, chunks int
		for s.Next() {
			ch := s.Current()
			chunks++
			if len(ch.Choices) == 0 {
				usageChunks++
				continue
			}
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("include_usage=%v: %v", includeUsage, err)
		}
		if text.String() != " The quick brown fox jumps" {
			t.Errorf("include_usage=%v: text = %q", includeUsage, text.String())
		}
		want := 0
		if includeUsage {
			want = 1
		}
		if usageChunks != want {
			t.Errorf("include_usage=%v: %d usage-only chunks reached the client, want %d", includeUsage, usageChunks, want)
		}
		// llmguard always asks the upstream for usage.
		_, body := h.mock.LastRequest()
		if !strings.Contains(string(body), `"include_usage":true`) {
			t.Errorf("include_usage=%v: upstream body %s lacks stream_options.include_usage", includeUsage, body)
		}
	}
}

func TestSDKReconcileShowsActualUsage(t *testing.T) {
	h := start(t, slowTPM)
	c := h.client(testKey)
	var raw1, raw2 *http.Response
	first, err := c.Chat.Completions.New(context.Background(), chatParams(500),
		option.WithHeader("x-mock-completion-tokens", "30"), option.WithResponseInto(&raw1))
	if err != nil {
		t.Fatal(err)
	}
	in := first.Usage.PromptTokens
	if r := remainingTokens(t, raw1.Header); r != 10000-in-500 {
		t.Fatalf("first remaining = %d, want %d (reservation of 500)", r, 10000-in-500)
	}
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(100), option.WithResponseInto(&raw2)); err != nil {
		t.Fatal(err)
	}
	// After reconciliation the first call cost in+30, not in+500.
	want := 10000 - (in + 30) - (in + 100)
	if r := remainingTokens(t, raw2.Header); r != want {
		t.Errorf("second remaining = %d, want %d (first call reconciled to 30 output tokens)", r, want)
	}
}

func TestSDK429AndRetryAfterMs(t *testing.T) {
	h := start(t, `
limits:
  - name: user-rps
    scope: user
    unit: requests
    rate: 4
    per: 1s
    burst: 1
`)
	c := h.client(testKey, option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(10)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Chat.Completions.New(context.Background(), chatParams(10))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want openai.Error 429", err)
	}
	if apiErr.Code != "rate_limit_exceeded" || apiErr.Type != "requests" || !strings.Contains(apiErr.Message, "user-rps") {
		t.Errorf("error = code %q type %q message %q", apiErr.Code, apiErr.Type, apiErr.Message)
	}
	ms, err := strconv.Atoi(apiErr.Response.Header.Get("retry-after-ms"))
	if err != nil || ms <= 0 || ms > 250 {
		t.Errorf("retry-after-ms = %q, want 1..250", apiErr.Response.Header.Get("retry-after-ms"))
	}
	if apiErr.Response.Header.Get("x-llmguard-limit") != "user-rps" {
		t.Errorf("x-llmguard-limit = %q, want the denying limit", apiErr.Response.Header.Get("x-llmguard-limit"))
	}
	if apiErr.Response.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q, want 1 (whole seconds, rounded up, never 0)", apiErr.Response.Header.Get("Retry-After"))
	}

	if m := h.metrics(); !strings.Contains(m, `llmguard_requests_total{flavor="openai",limit="user-rps",model="gpt-4o-mini",outcome="limited"} 1`) {
		t.Errorf("the denial is not in llmguard_requests_total:\n%s", m)
	}
}

func TestTooLargeIsNotRetryable(t *testing.T) {
	h := start(t, slowTPM)
	before := h.mock.Requests.Load()
	resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":20000}`)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status = %d, body %s", resp.StatusCode, body)
	}
	if resp.Header.Get("x-should-retry") != "false" || resp.Header.Get("Retry-After") != "" || resp.Header.Get("retry-after-ms") != "" {
		t.Errorf("headers: x-should-retry=%q Retry-After=%q retry-after-ms=%q", resp.Header.Get("x-should-retry"), resp.Header.Get("Retry-After"), resp.Header.Get("retry-after-ms"))
	}
	if !strings.Contains(body, "Request too large for limit user-tpm") || !strings.Contains(body, `"code":"rate_limit_exceeded"`) {
		t.Errorf("body = %s", body)
	}
	if h.mock.Requests.Load() != before {
		t.Error("a denied request reached the upstream")
	}
	// The denial spent nothing.
	resp, _ = h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`)
	if r := remainingTokens(t, resp.Header); r != 10000-8-100 {
		t.Errorf("remaining after a too-large denial = %d, want %d", r, 10000-8-100)
	}
}

func TestSDKRetryHonoursRetryAfterMs(t *testing.T) {
	// One request per 1.5s. The SDK's own backoff for a first retry is at
	// most 0.5s (0.5s × 2^0, minus jitter), which would be denied again; a
	// single retry passes only if the SDK waited as retry-after-ms said.
	h := start(t, `
limits:
  - name: user-rate
    scope: user
    unit: requests
    rate: 2
    per: 3s
    burst: 1
`)
	once := h.client(testKey, option.WithMaxRetries(0))
	if _, err := once.Chat.Completions.New(context.Background(), chatParams(10)); err != nil {
		t.Fatal(err)
	}
	before := h.mock.Requests.Load()
	retrying := h.client(testKey, option.WithMaxRetries(1))
	if _, err := retrying.Chat.Completions.New(context.Background(), chatParams(10)); err != nil {
		t.Fatalf("a single retry after retry-after-ms should pass: %v", err)
	}
	if n := h.mock.Requests.Load() - before; n != 1 {
		t.Errorf("upstream saw %d requests during the retried call, want 1 (denials never reach it)", n)
	}
}

func TestStreamFirstEventBeforeUpstreamFinishes(t *testing.T) {
	h := start(t, slowTPM)
	c := h.client(testKey)
	s := c.Chat.Completions.NewStreaming(context.Background(), chatParams(5), option.WithHeader("x-mock-delay-ms", "200"))
	if !s.Next() {
		t.Fatalf("no first event: %v", s.Err())
	}
	if n := h.mock.StreamsCompleted.Load(); n != 0 {
		t.Errorf("first event arrived after the upstream finished (%d completed): the stream was buffered", n)
	}
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
