package mockllm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

const (
	azureKey        = "azure-test-key"
	azureAPIVersion = "2024-10-21"
)

// startKeyed runs a mock that requires azureKey.
func startKeyed(t *testing.T) *Server {
	t.Helper()
	s, err := StartWith("127.0.0.1:0", Options{APIKey: azureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// azureClient is the openai-go client configured for Azure's dated API the
// way its azure package documents, against the mock (plain HTTP is allowed
// for loopback only, with WithUnsafeAllowHTTP). extra options follow.
func azureClient(s *Server, extra ...option.RequestOption) openai.Client {
	opts := append([]option.RequestOption{
		azure.WithEndpoint(s.URL, azureAPIVersion),
		azure.WithAPIKey(azureKey),
		azure.WithUnsafeAllowHTTP(),
		option.WithMaxRetries(0),
	}, extra...)
	return openai.NewClient(opts...)
}

// lastURIAndKey is the request URI and the api-key and Authorization
// headers of the mock's last request, and its body.
func lastURIAndKey(s *Server) (uri, apiKey, authz string, body []byte) {
	h, b := s.LastRequest()
	return string(h.RequestURI()), string(h.Peek("api-key")), string(h.Peek("Authorization")), b
}

// TestAzureSDK drives the mock through openai-go's azure options: each call
// reaches the path the SDK builds (the body's model moved into
// /openai/deployments/{model}/…, or /openai/responses), carries the key in
// api-key with no Authorization, and gets usage back equal to the weigher's
// count of the body the SDK sent.
func TestAzureSDK(t *testing.T) {
	s, w := startKeyed(t), testWeigher(t)
	c := azureClient(s)
	ctx := context.Background()
	const q = "?api-version=" + azureAPIVersion

	checkRequest := func(t *testing.T, wantPath string) []byte {
		t.Helper()
		uri, apiKey, authz, body := lastURIAndKey(s)
		if uri != wantPath+q || apiKey != azureKey || authz != "" {
			t.Errorf("request %s, api-key %q, Authorization %q; want %s%s with the key in api-key", uri, apiKey, authz, wantPath, q)
		}
		return body
	}

	chat := openai.ChatCompletionNewParams{
		Model:     "gpt-4o-mini",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about token buckets.")},
		MaxTokens: openai.Int(5),
	}

	t.Run("chat", func(t *testing.T) {
		got, err := c.Chat.Completions.New(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		body := checkRequest(t, "/openai/deployments/gpt-4o-mini/chat/completions")
		want := w.Chat(body).InputTokens
		if got.Choices[0].Message.Content != " The quick brown fox jumps" || got.Model != "gpt-4o-mini" {
			t.Errorf("content %q, model %q", got.Choices[0].Message.Content, got.Model)
		}
		if got.Usage.PromptTokens != want || got.Usage.CompletionTokens != 5 || got.Usage.TotalTokens != want+5 {
			t.Errorf("usage %+v, want prompt %d, completion 5", got.Usage, want)
		}
	})

	t.Run("chat stream with usage", func(t *testing.T) {
		p := chat
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		var chunks int
		for stream.Next() {
			chunk := stream.Current()
			if chunks == 0 && (len(chunk.Choices) != 0 || !strings.Contains(chunk.RawJSON(), `"prompt_filter_results"`)) {
				t.Errorf("first chunk is not Azure's prompt-filter chunk: %s", chunk.RawJSON())
			}
			chunks++
			if !acc.AddChunk(chunk) {
				t.Fatalf("chunk %d refused by the accumulator: %s", chunks, chunk.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		body := checkRequest(t, "/openai/deployments/gpt-4o-mini/chat/completions")
		want := w.Chat(body).InputTokens
		if acc.Choices[0].Message.Content != " The quick brown fox jumps" {
			t.Errorf("content %q", acc.Choices[0].Message.Content)
		}
		// prompt filter, role, 5 words, finish, usage
		if chunks != 9 || acc.Usage.PromptTokens != want || acc.Usage.CompletionTokens != 5 {
			t.Errorf("%d chunks, usage %+v; want 9 chunks, prompt %d, completion 5", chunks, acc.Usage, want)
		}
	})

	t.Run("completions", func(t *testing.T) {
		got, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:     "gpt-35-turbo-instruct",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")},
			MaxTokens: openai.Int(3),
		})
		if err != nil {
			t.Fatal(err)
		}
		body := checkRequest(t, "/openai/deployments/gpt-35-turbo-instruct/completions")
		want := w.Completions(body).InputTokens
		if got.Choices[0].Text != " The quick brown" || got.Usage.PromptTokens != want || got.Usage.CompletionTokens != 3 {
			t.Errorf("text %q, usage %+v; want prompt %d, completion 3", got.Choices[0].Text, got.Usage, want)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		got, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha beta", "gamma"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		body := checkRequest(t, "/openai/deployments/text-embedding-3-small/embeddings")
		want := w.Embeddings(body).InputTokens
		if len(got.Data) != 2 || len(got.Data[1].Embedding) != embeddingDims {
			t.Errorf("%d embeddings", len(got.Data))
		}
		if want == 0 || got.Usage.PromptTokens != want || got.Usage.TotalTokens != want {
			t.Errorf("usage %+v, want %d", got.Usage, want)
		}
	})

	t.Run("responses", func(t *testing.T) {
		got, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model:           "gpt-4o-mini",
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("This is a test.")},
			MaxOutputTokens: openai.Int(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		body := checkRequest(t, "/openai/responses")
		want := w.Responses(body).InputTokens
		if got.OutputText() != " The quick brown fox" || got.Usage.InputTokens != want || got.Usage.OutputTokens != 4 {
			t.Errorf("text %q, usage %+v; want input %d, output 4", got.OutputText(), got.Usage, want)
		}
	})

	t.Run("throttled", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, chat, option.WithHeader("x-mock-status", "429"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v, want *openai.Error", err)
		}
		if apiErr.StatusCode != 429 || apiErr.Code != "429" || apiErr.Message != "mock error 429" {
			t.Errorf("status %d, code %q, message %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
		}
		if h := apiErr.Response.Header; h.Get("retry-after-ms") != "1000" || h.Get("retry-after") != "1" {
			t.Errorf("retry-after-ms %q, retry-after %q", h.Get("retry-after-ms"), h.Get("retry-after"))
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, chat, azure.WithAPIKey("not-the-key"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "401" {
			t.Errorf("err = %v, want a 401 with code \"401\"", err)
		}
	})
}

// TestAzureV1SDK: Azure's v1 API through the plain OpenAI client, as
// Microsoft documents for Go with a key: base URL {endpoint}/openai/v1/ and
// option.WithAPIKey, which sends the key as a bearer token and no
// api-version.
func TestAzureV1SDK(t *testing.T) {
	s, w := startKeyed(t), testWeigher(t)
	c := openai.NewClient(option.WithBaseURL(s.URL+"/openai/v1/"), option.WithAPIKey(azureKey), option.WithMaxRetries(0))
	p := openai.ChatCompletionNewParams{
		Model:         "my-deployment",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
		MaxTokens:     openai.Int(2),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	uri, apiKey, authz, body := lastURIAndKey(s)
	if uri != "/openai/v1/chat/completions" || apiKey != "" || authz != "Bearer "+azureKey {
		t.Errorf("request %s, api-key %q, Authorization %q", uri, apiKey, authz)
	}
	want := w.Chat(body).InputTokens
	if acc.Model != "my-deployment" || acc.Usage.PromptTokens != want || acc.Usage.CompletionTokens != 2 {
		t.Errorf("model %q, usage %+v; want prompt %d, completion 2", acc.Model, acc.Usage, want)
	}
}

// TestAzurePaths: what the Azure paths answer to requests the SDK does not
// make — no api-version, unknown operations, keys in other headers, a body
// without a model — and that the key requirement covers the OpenAI and
// Anthropic paths in their own shapes.
func TestAzurePaths(t *testing.T) {
	s := startKeyed(t)
	key := map[string]string{"api-key": azureKey}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	const notFound = `{"error":{"code":"404","message":"Resource not found"}}`
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		want             string // the whole body, or "" to check only the status
	}{
		{name: "deployment without api-version", path: "/openai/deployments/gpt-4o-mini/chat/completions", body: chat, hdr: key, status: 404, want: notFound},
		{name: "responses without api-version", path: "/openai/responses", body: `{"model":"m","input":"x"}`, hdr: key, status: 404, want: notFound},
		{name: "unknown deployment operation", path: "/openai/deployments/d/images/edits?api-version=1", body: chat, hdr: key, status: 404, want: notFound},
		{name: "deployment without operation", path: "/openai/deployments/d?api-version=1", body: chat, hdr: key, status: 404, want: notFound},
		{name: "unknown v1 path", path: "/openai/v1/messages", body: chat, hdr: key, status: 404, want: notFound},
		{name: "v1 without api-version", path: "/openai/v1/chat/completions", body: chat, hdr: key, status: 200},
		{name: "v1 with api-version", path: "/openai/v1/embeddings?api-version=preview", body: `{"model":"e","input":"x"}`, hdr: key, status: 200},
		{name: "models", path: "/openai/models?api-version=1", hdr: key, status: 200},
		{name: "no key", path: "/openai/deployments/d/embeddings?api-version=1", body: `{"input":"x"}`, status: 401},
		{name: "bearer key", path: "/openai/deployments/d/embeddings?api-version=1", body: `{"input":"x"}`, hdr: map[string]string{"Authorization": "Bearer " + azureKey}, status: 200},
		{name: "x-api-key is not Azure's", path: "/openai/deployments/d/embeddings?api-version=1", body: `{"input":"x"}`, hdr: map[string]string{"x-api-key": azureKey}, status: 401},
		{name: "status", path: "/openai/deployments/d/completions?api-version=1", body: `{}`, hdr: map[string]string{"api-key": azureKey, "x-mock-status": "400"}, status: 400, want: `{"error":{"code":"400","message":"mock error 400"}}`},
		{name: "OpenAI path without key", path: "/v1/chat/completions", body: chat, status: 401, want: `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{name: "OpenAI path with api-key", path: "/v1/chat/completions", body: chat, hdr: key, status: 401},
		{name: "OpenAI path with bearer", path: "/v1/chat/completions", body: chat, hdr: map[string]string{"Authorization": "Bearer " + azureKey}, status: 200},
		{name: "Anthropic path without key", path: "/v1/messages", body: `{}`, status: 401, want: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{name: "Anthropic path with x-api-key", path: "/v1/messages/count_tokens", body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, hdr: map[string]string{"x-api-key": azureKey}, status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, s, tc.path, tc.body, tc.hdr)
			if r.status != tc.status || (tc.want != "" && string(r.body) != tc.want) {
				t.Errorf("%d %s, want %d %s", r.status, r.body, tc.status, tc.want)
			}
			if r.status >= 400 && strings.HasPrefix(tc.path, "/openai/") && r.header.Get("apim-request-id") == "" {
				t.Error("no apim-request-id")
			}
		})
	}

	// The deployment names the model when the body does not; a body's own
	// model wins.
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "my-dep"},
		{`{"model":"","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "my-dep"},
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "gpt-4o"},
	} {
		var r struct{ Model string }
		decode(t, post(t, s, "/openai/deployments/my-dep/chat/completions?api-version=1", tc.body, key), &r)
		if r.Model != tc.want {
			t.Errorf("%s: model %q, want %q", tc.body, r.Model, tc.want)
		}
	}
	if r := post(t, s, "/openai/deployments/my-dep/chat/completions?api-version=1", `{`, key); r.status != 400 {
		t.Errorf("bad JSON: %d %s", r.status, r.body)
	}
}
