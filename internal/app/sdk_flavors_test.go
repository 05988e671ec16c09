//go:build !nativetest

package app

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmguard/llmguard/config"
)

// These tests put the real OpenAI and Anthropic Go SDKs in front of
// llmguard (startFlavors: an OpenAI and an Anthropic upstream, both the
// mock), pointed at it only by base URL and virtual key, as an app would be.

// mockReply is the mock's reply of n words (see internal/mockllm/doc.go).
func mockReply(n int) string {
	words := []string{" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}
	var b strings.Builder
	for i := range n {
		b.WriteString(words[i%len(words)])
	}
	return b.String()
}

// mockEmbedding is the mock's 8-float embedding of the i-th input item.
func mockEmbedding(i int) []float32 {
	v := make([]float32, 8)
	for d := range v {
		v[d] = float32(math.Round(math.Sin(float64(i*8+d+1))*1e6) / 1e6)
	}
	return v
}

// directOpenAI is an OpenAI SDK client pointed straight at the mock,
// bypassing llmguard: what the upstream itself answers.
func (h *harness) directOpenAI() openai.Client {
	return openai.NewClient(option.WithBaseURL(h.mock.URL+"/v1/"), option.WithAPIKey("sk-upstream"),
		option.WithRequestTimeout(10*time.Second), option.WithMaxRetries(0))
}

// anthropicClient is an Anthropic SDK client pointed at llmguard with the
// virtual key.
func (h *harness) anthropicClient(opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(h.url + "/"),
		aoption.WithAPIKey(testKey),
		aoption.WithRequestTimeout(10 * time.Second),
	}, opts...)...)
}

// directAnthropic is an Anthropic SDK client pointed straight at the mock.
func (h *harness) directAnthropic() anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(h.mock.URL+"/"), aoption.WithAPIKey("sk-upstream"),
		aoption.WithRequestTimeout(10*time.Second), aoption.WithMaxRetries(0))
}

// price is a price list in pico-USD per token (USD per million tokens × 10^6).
type price struct{ input, cached, cacheWrite, output int64 }

// The prices of startFlavors' models: section (gpt-4o-mini sets no cache
// write price, so cache writes cost input; the mock reports none for it).
var (
	priceGPT4oMini = price{input: 150_000, cached: 75_000, cacheWrite: 150_000, output: 600_000}
	priceSonnet    = price{input: 3_000_000, cached: 300_000, cacheWrite: 3_750_000, output: 15_000_000}
)

// embeddedPrice is a model's input and output price from the embedded price
// table (config/prices.json), the layer under models: for a model the
// config does not list.
func embeddedPrice(t *testing.T, model string) price {
	t.Helper()
	table, err := config.ParsePrices(config.DefaultPricesJSON)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := table[model]
	if !ok || m.InputUSDPerMTok <= 0 {
		t.Fatalf("the embedded price table has no input price for %s", model)
	}
	pico := func(usdPerMTok float64) int64 { return int64(math.Round(usdPerMTok * 1e6)) }
	return price{input: pico(m.InputUSDPerMTok), output: pico(m.OutputUSDPerMTok)}
}

// usage is a request's usage as the SDK reports it, normalised: input is
// all of it, cached and cache writes included.
type usage struct{ input, cached, cacheWrite, output int64 }

func (u usage) tokens() int64 { return u.input + u.output }

// picoUSD is the exact cost before rounding.
func (u usage) picoUSD(p price) int64 {
	return (u.input-u.cached-u.cacheWrite)*p.input + u.cached*p.cached + u.cacheWrite*p.cacheWrite + u.output*p.output
}

// microUSD is the cost rounded up to a whole micro-dollar.
func (u usage) microUSD(p price) int64 { return (u.picoUSD(p) + 999_999) / 1_000_000 }

func anthropicUsage(u anthropic.Usage) usage {
	return usage{input: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		cached: u.CacheReadInputTokens, cacheWrite: u.CacheCreationInputTokens, output: u.OutputTokens}
}

func responsesParams(maxOut int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           "gpt-4o-mini",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me a story about a token bucket.")},
		MaxOutputTokens: openai.Int(maxOut),
	}
}

func completionParams(maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     "gpt-4o-mini",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"Once upon a time", "In a land far away"}},
		MaxTokens: openai.Int(maxTokens),
	}
}

func messageParams(maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: maxTokens,
		System:    []anthropic.TextBlockParam{{Text: "Be brief, and answer in plain words."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about token buckets, please."))},
	}
}

// responsesStream drains a Responses stream: the text of its deltas and the
// response of response.completed.
func responsesStream(t *testing.T, c openai.Client, p responses.ResponseNewParams, opts ...option.RequestOption) (string, responses.Response) {
	t.Helper()
	s := c.Responses.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var text strings.Builder
	var final responses.Response
	completed := 0
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.completed":
			completed++
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("responses stream: %v", err)
	}
	if completed != 1 {
		t.Fatalf("responses stream: %d response.completed events, want 1", completed)
	}
	return text.String(), final
}

// completionsStream drains a legacy completions stream: its text and the
// usage-only chunks.
func completionsStream(t *testing.T, c openai.Client, p openai.CompletionNewParams, opts ...option.RequestOption) (string, []openai.CompletionUsage) {
	t.Helper()
	s := c.Completions.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var text strings.Builder
	var usages []openai.CompletionUsage
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) == 0 {
			usages = append(usages, ch.Usage)
			continue
		}
		text.WriteString(ch.Choices[0].Text)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("completions stream: %v", err)
	}
	return text.String(), usages
}

// chatStream drains a chat stream: its text and the usage-only chunks.
func chatStream(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) (string, []openai.CompletionUsage) {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var text strings.Builder
	var usages []openai.CompletionUsage
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) == 0 {
			usages = append(usages, ch.Usage)
			continue
		}
		text.WriteString(ch.Choices[0].Delta.Content)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	return text.String(), usages
}

// messagesStream drains an Anthropic stream into the accumulated message,
// and the output_tokens of each message_delta.
func messagesStream(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams, opts ...aoption.RequestOption) (anthropic.Message, []int64) {
	t.Helper()
	s := c.Messages.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var msg anthropic.Message
	var deltas []int64
	for s.Next() {
		ev := s.Current()
		if ev.Type == "message_delta" {
			deltas = append(deltas, ev.Usage.OutputTokens)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("messages stream: %v", err)
	}
	return msg, deltas
}

// The OpenAI SDK's Responses, Completions and Embeddings calls, plain and
// streamed, pass through llmguard and return exactly what the upstream
// answers (the same call made straight to the mock), text and usage.
func TestOpenAISDKFlavorsThroughProxy(t *testing.T) {
	h := startFlavors(t, "")
	c := h.client(testKey, option.WithMaxRetries(0))
	direct := h.directOpenAI()
	ctx := context.Background()

	t.Run("responses", func(t *testing.T) {
		steer := []option.RequestOption{option.WithHeader("x-mock-completion-tokens", "12"), option.WithHeader("x-mock-reasoning-tokens", "7")}
		got, err := c.Responses.New(ctx, responsesParams(500), steer...)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.Responses.New(ctx, responsesParams(500), steer...)
		if err != nil {
			t.Fatal(err)
		}
		if got.OutputText() != mockReply(12) {
			t.Errorf("text = %q, want %q", got.OutputText(), mockReply(12))
		}
		u := got.Usage
		if u.InputTokens <= 0 || u.InputTokens != want.Usage.InputTokens {
			t.Errorf("input_tokens = %d, the mock answers %d", u.InputTokens, want.Usage.InputTokens)
		}
		if u.OutputTokens != 12+7 || u.OutputTokensDetails.ReasoningTokens != 7 {
			t.Errorf("output_tokens = %d (reasoning %d), want 19 (reasoning 7)", u.OutputTokens, u.OutputTokensDetails.ReasoningTokens)
		}
		if !u.InputTokensDetails.JSON.CachedTokens.Valid() || u.InputTokensDetails.CachedTokens != 0 {
			t.Errorf("cached_tokens = %d (present %v), want 0 as the mock sends", u.InputTokensDetails.CachedTokens, u.InputTokensDetails.JSON.CachedTokens.Valid())
		}
		if u.TotalTokens != u.InputTokens+u.OutputTokens {
			t.Errorf("total_tokens = %d, want %d", u.TotalTokens, u.InputTokens+u.OutputTokens)
		}
		var reasoningItems int
		for _, o := range got.Output {
			if o.Type == "reasoning" {
				reasoningItems++
			}
		}
		if reasoningItems != 1 {
			t.Errorf("%d reasoning output items, want 1", reasoningItems)
		}

		text, final := responsesStream(t, c, responsesParams(500), steer...)
		if text != mockReply(12) || final.OutputText() != mockReply(12) {
			t.Errorf("streamed text = %q, completed text %q, want %q", text, final.OutputText(), mockReply(12))
		}
		if fu := final.Usage; fu.InputTokens != want.Usage.InputTokens || fu.OutputTokens != 19 ||
			fu.OutputTokensDetails.ReasoningTokens != 7 || fu.InputTokensDetails.CachedTokens != 0 || fu.TotalTokens != want.Usage.TotalTokens {
			t.Errorf("streamed usage = %s, the mock answers %s", fu.RawJSON(), want.Usage.RawJSON())
		}
	})

	t.Run("completions", func(t *testing.T) {
		steer := option.WithHeader("x-mock-completion-tokens", "9")
		got, err := c.Completions.New(ctx, completionParams(300), steer)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.Completions.New(ctx, completionParams(300), steer)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Choices) != 1 || got.Choices[0].Text != mockReply(9) {
			t.Fatalf("choices = %+v, want one with %q", got.Choices, mockReply(9))
		}
		if got.Usage.PromptTokens <= 0 || got.Usage.PromptTokens != want.Usage.PromptTokens ||
			got.Usage.CompletionTokens != 9 || got.Usage.TotalTokens != want.Usage.TotalTokens {
			t.Errorf("usage = %s, the mock answers %s", got.Usage.RawJSON(), want.Usage.RawJSON())
		}

		// Without include_usage llmguard asks the upstream for usage and
		// hides the extra chunk; with it, the client gets it unchanged.
		for _, include := range []bool{false, true} {
			p := completionParams(300)
			if include {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			text, usages := completionsStream(t, c, p, steer)
			if text != mockReply(9) {
				t.Errorf("include_usage=%v: streamed text = %q, want %q", include, text, mockReply(9))
			}
			if !include {
				if len(usages) != 0 {
					t.Errorf("include_usage=false: %d usage-only chunks reached the client, want 0", len(usages))
				}
				continue
			}
			if len(usages) != 1 {
				t.Fatalf("include_usage=true: %d usage-only chunks, want 1", len(usages))
			}
			if u := usages[0]; u.PromptTokens != want.Usage.PromptTokens || u.CompletionTokens != 9 || u.TotalTokens != want.Usage.TotalTokens {
				t.Errorf("streamed usage = %s, the mock answers %s", u.RawJSON(), want.Usage.RawJSON())
			}
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		inputs := []string{"a token bucket", "refills at a steady rate", "and holds a burst"}
		for _, format := range []openai.EmbeddingNewParamsEncodingFormat{"", openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
			p := openai.EmbeddingNewParams{
				Model:          openai.EmbeddingModelTextEmbedding3Small,
				Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
				EncodingFormat: format,
			}
			want, err := direct.Embeddings.New(ctx, p)
			if err != nil {
				t.Fatalf("format %q: %v", format, err)
			}
			got, err := c.Embeddings.New(ctx, p)
			if err != nil {
				t.Fatalf("format %q: %v", format, err)
			}
			if got.Usage.PromptTokens <= 0 || got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.TotalTokens != want.Usage.TotalTokens {
				t.Errorf("format %q: usage = %s, the mock answers %s", format, got.Usage.RawJSON(), want.Usage.RawJSON())
			}
			if len(got.Data) != len(inputs) {
				t.Fatalf("format %q: %d embeddings, want %d", format, len(got.Data), len(inputs))
			}
			for i, e := range got.Data {
				wantVec := mockEmbedding(i)
				if e.Index != int64(i) || len(e.Embedding) != len(wantVec) {
					t.Fatalf("format %q: embedding %d = index %d, %d dims", format, i, e.Index, len(e.Embedding))
				}
				for d, f := range e.Embedding {
					if float32(f) != wantVec[d] {
						t.Errorf("format %q: embedding %d[%d] = %v, want %v", format, i, d, f, wantVec[d])
					}
				}
			}
			// The encoding the SDK asked for reached the upstream.
			_, body := h.mock.LastRequest() // the proxied call's body
			wantFormat := `"encoding_format":"` + string(format) + `"`
			if format != "" && !strings.Contains(string(body), wantFormat) {
				t.Errorf("the upstream body lacks %s: %s", wantFormat, body)
			}
		}
	})
}

// The Anthropic SDK's Messages calls pass through llmguard unchanged: text,
// input, cache reads and writes, and output; a stream accumulates to the
// same message, its split message_delta ending on the last (cumulative)
// value.
func TestAnthropicSDKThroughProxy(t *testing.T) {
	h := startFlavors(t, "")
	c := h.anthropicClient(aoption.WithMaxRetries(0))
	direct := h.directAnthropic()
	ctx := context.Background()
	steer := []aoption.RequestOption{
		aoption.WithHeader("x-mock-completion-tokens", "15"),
		aoption.WithHeader("x-mock-cache-read", "7"),
		aoption.WithHeader("x-mock-cache-write", "5"),
	}

	want, err := direct.Messages.New(ctx, messageParams(400), steer...)
	if err != nil {
		t.Fatal(err)
	}
	if want.Usage.InputTokens <= 0 {
		t.Fatalf("the mock's input_tokens is %d: the prompt is too short for the cache headers", want.Usage.InputTokens)
	}

	got, err := c.Messages.New(ctx, messageParams(400), steer...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Content) != 1 || got.Content[0].Text != mockReply(15) {
		t.Errorf("content = %+v, want %q", got.Content, mockReply(15))
	}
	u := got.Usage
	if u.InputTokens != want.Usage.InputTokens || u.CacheReadInputTokens != 7 || u.CacheCreationInputTokens != 5 || u.OutputTokens != 15 {
		t.Errorf("usage = %s, want input %d, cache read 7, cache write 5, output 15", u.RawJSON(), want.Usage.InputTokens)
	}
	// The proxy passed the steering headers the SDK set (option.WithHeader)
	// and replaced the virtual key with the upstream's.
	hdr, _ := h.mock.LastRequest()
	if string(hdr.Peek("x-mock-cache-read")) != "7" {
		t.Errorf("upstream x-mock-cache-read = %q", hdr.Peek("x-mock-cache-read"))
	}
	if k := string(hdr.Peek("x-api-key")); k == testKey {
		t.Errorf("upstream x-api-key = %q: the virtual key reached the upstream", k)
	}

	for _, split := range []bool{false, true} {
		opts := steer
		if split {
			opts = append(append([]aoption.RequestOption{}, steer...), aoption.WithHeader("x-mock-split-delta", "1"))
		}
		msg, deltas := messagesStream(t, c, messageParams(400), opts...)
		if len(msg.Content) != 1 || msg.Content[0].Text != mockReply(15) {
			t.Errorf("split=%v: streamed content = %+v, want %q", split, msg.Content, mockReply(15))
		}
		wantDeltas := []int64{15}
		if split {
			wantDeltas = []int64{7, 15}
		}
		if !slicesEqual(deltas, wantDeltas) {
			t.Errorf("split=%v: message_delta output_tokens = %v, want %v", split, deltas, wantDeltas)
		}
		mu := msg.Usage
		if mu.InputTokens != want.Usage.InputTokens || mu.CacheReadInputTokens != 7 || mu.CacheCreationInputTokens != 5 || mu.OutputTokens != 15 {
			t.Errorf("split=%v: accumulated usage = input %d, cache read %d, cache write %d, output %d; want %d, 7, 5, 15",
				split, mu.InputTokens, mu.CacheReadInputTokens, mu.CacheCreationInputTokens, mu.OutputTokens, want.Usage.InputTokens)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("split=%v: stop_reason = %q", split, msg.StopReason)
		}
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A denial reaches an Anthropic SDK caller as the SDK's own error type:
// 429 with Anthropic's rate_limit_error.
func TestAnthropicSDK429(t *testing.T) {
	h := startFlavors(t, `  - {name: claude-rph, scope: user, unit: requests, rate: 1, per: 1h, burst: 1, models: ["claude-*"]}`)
	c := h.anthropicClient(aoption.WithMaxRetries(0))
	if _, err := c.Messages.New(context.Background(), messageParams(50)); err != nil {
		t.Fatal(err)
	}
	before := h.mock.Requests.Load()
	_, err := c.Messages.New(context.Background(), messageParams(50))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T), want *anthropic.Error", err, err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("StatusCode = %d, want 429", apiErr.StatusCode)
	}
	if apiErr.Type() != "rate_limit_error" {
		t.Errorf("Type() = %q, want rate_limit_error (body %s)", apiErr.Type(), apiErr.RawJSON())
	}
	if !strings.Contains(apiErr.Message, "claude-rph") {
		t.Errorf("Message = %q, want the denying limit named", apiErr.Message)
	}
	if ra, _ := strconv.Atoi(apiErr.Response.Header.Get("retry-after")); ra < 3000 {
		t.Errorf("retry-after = %q, want about an hour", apiErr.Response.Header.Get("retry-after"))
	}
	if n := h.mock.Requests.Load() - before; n != 0 {
		t.Errorf("the denied request reached the upstream (%d requests)", n)
	}

	// The streaming call is denied the same way, before any event.
	s := c.Messages.NewStreaming(context.Background(), messageParams(50))
	for s.Next() {
		t.Errorf("a denied stream delivered an event: %s", s.Current().Type)
	}
	apiErr = nil
	if err := s.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" {
		t.Errorf("stream err = %v, want *anthropic.Error 429 rate_limit_error", err)
	}
	s.Close()
}

// The Anthropic SDK's retry waits as llmguard's denial says.
//
// anthropic-sdk-go v2.15.0, internal/requestconfig/requestconfig.go: a 429
// is retried (shouldRetry; x-should-retry is read first, and llmguard sends
// none on an ordinary denial), after retryDelay(res, retryCount), which
// takes the first of Retry-After-Ms (milliseconds) and Retry-After (seconds,
// or an HTTP date) that parses, uncapped, and otherwise backs off
// 0.5 s × 2^retryCount minus up to 25% jitter, capped at 8 s. For the first
// retry (retryCount 0) that fallback is 0.375–0.5 s.
//
// The limit admits one request per 1.5 s. After a first call empties it, a
// call with MaxRetries(1) is denied with retry-after-ms ≈ 1500 (Retry-After
// 2); its single retry passes only if the SDK waited as told: after its own
// 0.5 s backoff the bucket would still be empty and the call would fail.
func TestAnthropicSDKRetryHonoursRetryAfter(t *testing.T) {
	h := startFlavors(t, `  - {name: claude-rate, scope: user, unit: requests, rate: 2, per: 3s, burst: 1, models: ["claude-*"]}`)
	once := h.anthropicClient(aoption.WithMaxRetries(0))
	if _, err := once.Messages.New(context.Background(), messageParams(20)); err != nil {
		t.Fatal(err)
	}
	var attempts, denied atomic.Int64
	var retryAfterMs atomic.Value
	count := func(req *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
		attempts.Add(1)
		resp, err := next(req)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			denied.Add(1)
			retryAfterMs.Store(resp.Header.Get("retry-after-ms"))
		}
		return resp, err
	}
	before := h.mock.Requests.Load()
	retrying := h.anthropicClient(aoption.WithMaxRetries(1), aoption.WithMiddleware(count))
	msg, err := retrying.Messages.New(context.Background(), messageParams(20))
	if err != nil {
		t.Fatalf("a single retry after retry-after should pass: %v (attempts %d, denied %d)", err, attempts.Load(), denied.Load())
	}
	if attempts.Load() != 2 || denied.Load() != 1 {
		t.Errorf("attempts = %d, denied = %d; want 2 attempts, the first denied", attempts.Load(), denied.Load())
	}
	ms, _ := strconv.Atoi(toString(retryAfterMs.Load()))
	if ms <= 0 || ms > 1500 {
		t.Errorf("retry-after-ms = %q, want 1..1500", toString(retryAfterMs.Load()))
	}
	if ms <= 500 {
		// Only if the two calls were over a second apart (a stalled machine).
		t.Logf("retry-after-ms = %d is within the SDK's own backoff: this run does not tell them apart", ms)
	}
	if msg.Content[0].Text != mockReply(16) {
		t.Errorf("content = %q", msg.Content[0].Text)
	}
	if n := h.mock.Requests.Load() - before; n != 1 {
		t.Errorf("upstream saw %d requests during the retried call, want 1 (denials never reach it)", n)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// After each SDK call, the tokens bucket and the usd bucket hold exactly
// what the usage the SDK received says: tokens = input (cached and cache
// writes included) + output; micro-USD = ⌈Σ tokens × pico-USD per token /
// 10^6⌉ per request, with cached input and cache writes at their own
// prices.
func TestSDKFlavorsChargeExactly(t *testing.T) {
	h := startFlavors(t, usdLimit)
	oc := h.client(testKey, option.WithMaxRetries(0))
	ac := h.anthropicClient(aoption.WithMaxRetries(0))
	ctx := context.Background()
	withUsage := openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}

	chatUsage := func(u openai.CompletionUsage) usage {
		return usage{input: u.PromptTokens, cached: u.PromptTokensDetails.CachedTokens, output: u.CompletionTokens}
	}
	respUsage := func(u responses.ResponseUsage) usage {
		return usage{input: u.InputTokens, cached: u.InputTokensDetails.CachedTokens, output: u.OutputTokens}
	}
	// The reference usage of a stream whose client does not see usage: the
	// same request unstreamed (the mock's answer is deterministic).
	var hiddenChatUsage usage

	cases := []struct {
		name  string
		price price
		call  func(t *testing.T) usage
	}{
		{"chat JSON", priceGPT4oMini, func(t *testing.T) usage {
			r, err := oc.Chat.Completions.New(ctx, chatParams(300), option.WithHeader("x-mock-completion-tokens", "11"))
			if err != nil {
				t.Fatal(err)
			}
			hiddenChatUsage = chatUsage(r.Usage)
			return chatUsage(r.Usage)
		}},
		{"chat stream", priceGPT4oMini, func(t *testing.T) usage {
			p := chatParams(300)
			p.StreamOptions = withUsage
			_, us := chatStream(t, oc, p, option.WithHeader("x-mock-completion-tokens", "11"))
			if len(us) != 1 {
				t.Fatalf("%d usage chunks, want 1", len(us))
			}
			return chatUsage(us[0])
		}},
		{"chat stream, usage hidden from the client", priceGPT4oMini, func(t *testing.T) usage {
			_, us := chatStream(t, oc, chatParams(300), option.WithHeader("x-mock-completion-tokens", "11"))
			if len(us) != 0 {
				t.Fatalf("%d usage chunks reached the client, want 0", len(us))
			}
			return hiddenChatUsage
		}},
		{"responses JSON", priceGPT4oMini, func(t *testing.T) usage {
			r, err := oc.Responses.New(ctx, responsesParams(500),
				option.WithHeader("x-mock-completion-tokens", "13"), option.WithHeader("x-mock-reasoning-tokens", "6"))
			if err != nil {
				t.Fatal(err)
			}
			return respUsage(r.Usage)
		}},
		{"responses stream", priceGPT4oMini, func(t *testing.T) usage {
			_, r := responsesStream(t, oc, responsesParams(500),
				option.WithHeader("x-mock-completion-tokens", "13"), option.WithHeader("x-mock-reasoning-tokens", "6"))
			return respUsage(r.Usage)
		}},
		{"completions JSON", priceGPT4oMini, func(t *testing.T) usage {
			r, err := oc.Completions.New(ctx, completionParams(300), option.WithHeader("x-mock-completion-tokens", "9"))
			if err != nil {
				t.Fatal(err)
			}
			return chatUsage(r.Usage)
		}},
		{"completions stream", priceGPT4oMini, func(t *testing.T) usage {
			p := completionParams(300)
			p.StreamOptions = withUsage
			_, us := completionsStream(t, oc, p, option.WithHeader("x-mock-completion-tokens", "9"))
			if len(us) != 1 {
				t.Fatalf("%d usage chunks, want 1", len(us))
			}
			return chatUsage(us[0])
		}},
		{"embeddings JSON (price from the embedded table)", embeddedPrice(t, "text-embedding-3-small"), func(t *testing.T) usage {
			r, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model: openai.EmbeddingModelTextEmbedding3Small,
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a b c", "d e", "one more line"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			return usage{input: r.Usage.PromptTokens}
		}},
		{"messages JSON with cache read and write", priceSonnet, func(t *testing.T) usage {
			m, err := ac.Messages.New(ctx, messageParams(400), aoption.WithHeader("x-mock-completion-tokens", "12"),
				aoption.WithHeader("x-mock-cache-read", "7"), aoption.WithHeader("x-mock-cache-write", "5"))
			if err != nil {
				t.Fatal(err)
			}
			return anthropicUsage(m.Usage)
		}},
		{"messages stream with cache read and write, split delta", priceSonnet, func(t *testing.T) usage {
			m, _ := messagesStream(t, ac, messageParams(400), aoption.WithHeader("x-mock-completion-tokens", "13"),
				aoption.WithHeader("x-mock-cache-read", "7"), aoption.WithHeader("x-mock-cache-write", "5"),
				aoption.WithHeader("x-mock-split-delta", "1"))
			return anthropicUsage(m.Usage)
		}},
		{"messages JSON without cache", priceSonnet, func(t *testing.T) usage {
			m, err := ac.Messages.New(ctx, messageParams(400), aoption.WithHeader("x-mock-completion-tokens", "3"))
			if err != nil {
				t.Fatal(err)
			}
			return anthropicUsage(m.Usage)
		}},
	}

	fractional := 0 // cases whose cost is not a whole micro-dollar: the ceiling shows
	for _, tc := range cases {
		beforeTok, beforeUSD := h.left()
		u := tc.call(t)
		if u.input <= 0 {
			t.Fatalf("%s: the SDK got input %d", tc.name, u.input)
		}
		wantTok, wantUSD := u.tokens(), u.microUSD(tc.price)
		if u.picoUSD(tc.price)%1_000_000 != 0 {
			fractional++
		}
		var gotTok, gotUSD int64
		// Streams settle when the upstream's stream ends, which may be just
		// after the client has read its last event: poll, boundedly.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			tok, usd := h.left()
			gotTok, gotUSD = beforeTok-tok, beforeUSD-usd
			if (gotTok == wantTok && gotUSD == wantUSD) || time.Now().After(deadline) {
				break
			}
		}
		if gotTok != wantTok {
			t.Errorf("%s: charged %d tokens, the usage says %d (%+v)", tc.name, gotTok, wantTok, u)
		}
		if gotUSD != wantUSD {
			t.Errorf("%s: charged %d µUSD, the usage says %d (%+v: %d pico-USD, rounded up)", tc.name, gotUSD, wantUSD, u, u.picoUSD(tc.price))
		}
		t.Logf("%s: %+v → %d tokens, %d µUSD", tc.name, u, wantTok, wantUSD)
	}
	if fractional < len(cases)/2 {
		t.Errorf("only %d of %d cases cost a fractional micro-dollar: the test no longer shows the ceiling", fractional, len(cases))
	}
}
