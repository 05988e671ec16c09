//go:build !nativetest

package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/weigher"
)

// These tests put the official OpenAI Go SDK, configured with its Azure
// options, in front of llmguard's azure flavor, with the mock as the Azure
// resource: it demands the gateway's own key (sk-upstream) in api-key, so
// every answer that succeeds proves the caller's virtual key was replaced.

const azureAPIVersion = "2024-10-21"

// startAzure runs llmguard with one azure upstream whose deployments
// chat-prod and embed map to gpt-4o-mini and text-embedding-3-small, a
// slow 100,000-token bucket, the usd limit, and extra limits.
func startAzure(t *testing.T, extraLimits string) *harness {
	t.Helper()
	mock, err := mockllm.StartWith("127.0.0.1:0", mockllm.Options{APIKey: "sk-upstream"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	t.Setenv("LLMGUARD_TEST_UPSTREAM_KEY", "sk-upstream")
	return startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - name: aoai
    flavor: azure
    base_url: "%[1]s"
    api_key_env: LLMGUARD_TEST_UPSTREAM_KEY
    deployments: {chat-prod: gpt-4o-mini, embed: text-embedding-3-small}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, cached_input_usd_per_mtok: 0.075, output_usd_per_mtok: 0.60, default_max_output_tokens: 77}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
%[3]s
%[4]s`, mock.URL, testKey, usdLimit, extraLimits))
}

// azureClient is the SDK configured as its azure package documents, with
// the virtual key as the Azure key.
func (h *harness) azureClient(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		azure.WithEndpoint(h.url, azureAPIVersion),
		azure.WithAPIKey(testKey),
		azure.WithUnsafeAllowHTTP(), // plain HTTP to a loopback address
		option.WithMaxRetries(0),
		option.WithRequestTimeout(10 * time.Second),
	}, opts...)...)
}

// azureLeft is what user-tpm (tokens) and user-usd (micro-USD) hold, read
// from a requests-only probe (GET /openai/models) with the key in api-key.
func (h *harness) azureLeft() (tokens, microUSD int64) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/openai/models?api-version="+azureAPIVersion, nil)
	req.Header.Set("api-key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		h.t.Fatalf("probe: %d", resp.StatusCode)
	}
	return remainingTokens(h.t, resp.Header), rateLimitRemaining(h.t, resp.Header, "user-usd")
}

// Chat (plain and streamed), completions and embeddings through the SDK's
// Azure options reach the deployment paths, are charged exactly the usage
// the upstream reports, in tokens and in micro-USD at the price of the
// model the deployment maps to; the stream's usage chunk, which llmguard
// asked for, does not reach the caller.
func TestAzureSDKReconcilesEveryEndpoint(t *testing.T) {
	h := startAzure(t, "")
	c := h.azureClient()
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{
		Model:     "chat-prod", // the deployment's name, as Azure's SDK users write it
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about token buckets.")},
		MaxTokens: openai.Int(300),
	}
	checkCharge := func(name string, beforeTok, beforeUSD int64, u usage, p price) {
		t.Helper()
		tok, usd := h.azureLeft()
		if got := beforeTok - tok; got != u.tokens() {
			t.Errorf("%s: charged %d tokens, want %d (the reported usage)", name, got, u.tokens())
		}
		if got := beforeUSD - usd; got != u.microUSD(p) {
			t.Errorf("%s: charged %d µUSD, want %d (usage at the mapped model's price)", name, got, u.microUSD(p))
		}
	}

	tok, usd := h.azureLeft()
	got, err := c.Chat.Completions.New(ctx, chat, option.WithHeader("x-mock-completion-tokens", "12"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.CompletionTokens != 12 || got.Usage.PromptTokens == 0 {
		t.Fatalf("usage %+v", got.Usage)
	}
	if uri, _ := h.mock.LastRequest(); !strings.HasPrefix(string(uri.RequestURI()), "/openai/deployments/chat-prod/chat/completions?api-version=") ||
		string(uri.Peek("api-key")) != "sk-upstream" || len(uri.Peek("Authorization")) != 0 {
		t.Errorf("upstream got %s with api-key %q, Authorization %q", uri.RequestURI(), uri.Peek("api-key"), uri.Peek("Authorization"))
	}
	checkCharge("chat", tok, usd, usage{input: got.Usage.PromptTokens, output: got.Usage.CompletionTokens}, priceGPT4oMini)

	tok, usd = h.azureLeft()
	stream := c.Chat.Completions.NewStreaming(ctx, chat, option.WithHeader("x-mock-completion-tokens", "7"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		ch := stream.Current()
		if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
			t.Errorf("the caller got the usage chunk llmguard asked for: %s", ch.RawJSON())
		}
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != mockReply(7) {
		t.Fatalf("streamed %q", acc.Choices[0].Message.Content)
	}
	_, reqBody := h.mock.LastRequest() // the stream's request: nothing was sent since
	w, err := weigher.New(weigher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := w.Chat(reqBody).InputTokens // what the mock reports in the usage chunk the caller never saw
	// A stream is settled just after its last byte left: wait for it.
	waitFor(10*time.Second, func() bool { left, _ := h.azureLeft(); return tok-left == in+7 })
	checkCharge("chat stream", tok, usd, usage{input: in, output: 7}, priceGPT4oMini)

	tok, usd = h.azureLeft()
	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model: "chat-prod", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(50)}, option.WithHeader("x-mock-completion-tokens", "4"))
	if err != nil {
		t.Fatal(err)
	}
	checkCharge("completions", tok, usd, usage{input: comp.Usage.PromptTokens, output: comp.Usage.CompletionTokens}, priceGPT4oMini)

	tok, _ = h.azureLeft()
	emb, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a b c", "d e"}}})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := h.azureLeft()
	if emb.Usage.TotalTokens == 0 || tok-left != emb.Usage.TotalTokens {
		t.Errorf("embeddings: charged %d tokens, want %d", tok-left, emb.Usage.TotalTokens)
	}
}

// A denial reaches the SDK as Azure's 429: its error shape (code "429",
// llmguard's reason in inner_error), retry-after and retry-after-ms, and
// Azure's x-ratelimit headers; a wrong key is Azure's 401.
func TestAzureSDKDenialAndUnauthorized(t *testing.T) {
	h := startAzure(t, `  - {name: one-per-hour, scope: user, unit: requests, rate: 1, per: 1h}`)
	c := h.azureClient()
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "chat-prod", MaxTokens: openai.Int(10),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
	var first *http.Response
	if _, err := c.Chat.Completions.New(ctx, chat, option.WithResponseInto(&first)); err != nil {
		t.Fatal(err)
	}
	if first.Header.Get("x-ratelimit-remaining-requests") != "0" || first.Header.Get("x-ratelimit-reset-requests") != "3600" {
		t.Errorf("x-ratelimit-*-requests: remaining %q, reset %q; want 0 and 3600 (whole seconds, as Azure gives them)",
			first.Header.Get("x-ratelimit-remaining-requests"), first.Header.Get("x-ratelimit-reset-requests"))
	}
	_, err := c.Chat.Completions.New(ctx, chat)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "429" {
		t.Fatalf("err %v, want Azure's 429", err)
	}
	raw := apiErr.RawJSON()
	if !strings.Contains(raw, `"inner_error":{"code":"rate_limit_exceeded"}`) || !strings.Contains(raw, "one-per-hour") {
		t.Errorf("429 body %s: want llmguard's reason in inner_error and the limit named", raw)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra == "" || apiErr.Response.Header.Get("retry-after-ms") == "" {
		t.Errorf("429 without retry-after / retry-after-ms: %v", apiErr.Response.Header)
	}

	bad := openai.NewClient(azure.WithEndpoint(h.url, azureAPIVersion), azure.WithAPIKey("not-a-key"),
		azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(ctx, chat)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "401" {
		t.Fatalf("err %v, want Azure's 401", err)
	}
}

// The v1 API (/openai/v1/…, the model in the body, the key as a bearer
// token, as Microsoft's v1 examples configure the plain OpenAI client) is
// weighed and reconciled like the deployment paths.
func TestAzureV1API(t *testing.T) {
	h := startAzure(t, "")
	c := openai.NewClient(option.WithBaseURL(h.url+"/openai/v1/"), option.WithAPIKey(testKey),
		option.WithMaxRetries(0), option.WithRequestTimeout(10*time.Second))
	tok, usd := h.azureLeft()
	got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "chat-prod", MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about token buckets.")}},
		option.WithHeader("x-mock-completion-tokens", "5"))
	if err != nil {
		t.Fatal(err)
	}
	u := usage{input: got.Usage.PromptTokens, output: got.Usage.CompletionTokens}
	left, leftUSD := h.azureLeft()
	if tok-left != u.tokens() || usd-leftUSD != u.microUSD(priceGPT4oMini) {
		t.Errorf("charged %d tokens and %d µUSD, want %d and %d", tok-left, usd-leftUSD, u.tokens(), u.microUSD(priceGPT4oMini))
	}
	if req, _ := h.mock.LastRequest(); string(req.Peek("api-key")) != "sk-upstream" || len(req.Peek("Authorization")) != 0 {
		t.Errorf("upstream got api-key %q, Authorization %q; want the gateway's key in api-key only", req.Peek("api-key"), req.Peek("Authorization"))
	}
}

// A deployment is weighed as the model it maps to: a call without
// max_tokens reserves that model's default output (77 here, not the
// global 4096), on either API.
func TestAzureDeploymentReservesItsModelsDefault(t *testing.T) {
	h := startAzure(t, "")
	w, err := weigher.New(weigher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/openai/deployments/chat-prod/chat/completions?api-version=" + azureAPIVersion, "/openai/v1/chat/completions"} {
		body := `{"model":"chat-prod","messages":[{"role":"user","content":"Tell me about token buckets."}]}`
		before, _ := h.azureLeft()
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
		req.Header.Set("api-key", testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		in := w.WeighAs(weigher.KindChat, []byte(body), "gpt-4o-mini").InputTokens
		if got := before - remainingTokens(t, resp.Header); resp.StatusCode != 200 || got != in+77 {
			t.Errorf("%s: %d, reserved %d tokens, want %d input + 77 (gpt-4o-mini's default output)", path, resp.StatusCode, got, in)
		}
	}
}

// A deployment is its model's whatever its case (Azure matches names
// without regard to case): a model's rule cannot be escaped by spelling
// the deployment differently, on either API.
func TestAzureDeploymentCaseDoesNotEscapeModelRules(t *testing.T) {
	h := startAzure(t, `  - {name: mini-hourly, scope: user, unit: requests, rate: 1, per: 1h, models: [gpt-4o-mini]}`)
	send := func(path, model string) int {
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(`{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("api-key", testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const q = "?api-version=" + azureAPIVersion
	if st := send("/openai/deployments/chat-prod/chat/completions"+q, "x"); st != 200 {
		t.Fatalf("first call: %d", st)
	}
	for _, c := range []struct{ path, model string }{
		{"/openai/deployments/CHAT-PROD/chat/completions" + q, "x"},
		{"/openai/deployments/Chat-Prod/chat/completions" + q, "x"},
		{"/openai/v1/chat/completions", "CHAT-PROD"},
	} {
		if st := send(c.path, c.model); st != 429 {
			t.Errorf("%s (model %s): %d, want 429 from gpt-4o-mini's rule", c.path, c.model, st)
		}
	}
}

// A second credential the upstream (or Azure API Management in front of
// it) would honour never reaches it: Ocp-Apim-Subscription-Key and key
// query parameters are dropped, the rest of the query kept.
func TestAzureSmuggledCredentialsAreDropped(t *testing.T) {
	h := startAzure(t, "")
	req, _ := http.NewRequest(http.MethodPost, h.url+"/openai/deployments/chat-prod/chat/completions?api-version="+azureAPIVersion+"&Subscription-Key=sk-other&api-key=sk-other2",
		strings.NewReader(`{"model":"x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("api-key", testKey)
	req.Header.Set("Ocp-Apim-Subscription-Key", "sk-apim")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	up, _ := h.mock.LastRequest()
	if got := string(up.RequestURI()); got != "/openai/deployments/chat-prod/chat/completions?api-version="+azureAPIVersion {
		t.Errorf("upstream got %s: the key parameters were forwarded", got)
	}
	if v := up.Peek("Ocp-Apim-Subscription-Key"); len(v) != 0 {
		t.Errorf("upstream got Ocp-Apim-Subscription-Key %q", v)
	}
}

// A request fasthttp cannot read (two Content-Length fields) on an Azure
// path is refused in Azure's error shape, like every other refusal there.
func TestAzureMalformedRequestInAzureShape(t *testing.T) {
	h := startAzure(t, "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /openai/deployments/chat-prod/chat/completions?api-version=%s HTTP/1.1\r\nHost: x\r\napi-key: %s\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", azureAPIVersion, testKey)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"400"`) {
		t.Errorf("%d %s, want 400 in Azure's shape", resp.StatusCode, body)
	}
}

// An Azure client, whose key llmguard reads as api-key only on the paths it
// routes to an Azure upstream, reads its limits under /openai/, as its
// endpoint's paths are (trial16: the README named only
// /v1/llmguard/limits, where a config whose default upstream is OpenAI's
// does not read api-key).
func TestAzureCallerReadsItsLimits(t *testing.T) {
	h := startAzure(t, "")
	for _, p := range []string{"/openai/v1/llmguard/limits", "/openai/deployments/chat-prod/llmguard/limits"} {
		req, _ := http.NewRequest(http.MethodGet, h.url+p, nil)
		req.Header.Set("api-key", testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"name":"user-tpm"`) {
			t.Errorf("GET %s with api-key: %d %s; want the caller's report", p, resp.StatusCode, b)
		}
	}
}
