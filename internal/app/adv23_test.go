package app

// Adversarial tests of adv23 (2026-12-05): usage figures an upstream
// reports in its own way, read as OpenAI's. Each drives llmguard through
// loopback sockets to an upstream that bills what it reports, and fails
// where it billed more than the bucket held.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// reasoningApart23 is an upstream that reasons before it answers and
// reports the reasoning outside the output figure, as xAI's chat API does
// ("reasoning token consumption will be counted separately from
// completion_tokens, but will be counted in the total_tokens",
// https://docs.x.ai/docs/key-information/consumption-and-rate-limits) and
// as gateways translating Gemini's usageMetadata do (thoughtsTokenCount
// left out of completion_tokens, kept in total_tokens). Each call bills
// its input's words, 40 tokens of answer and 900 of reasoning; shape picks
// the usage object it reports (prompt, completion, reasoning and total
// given as %d in that order; Responses: input, output, reasoning, total).
type reasoningApart23 struct {
	url    string
	billed atomic.Int64
}

func startReasoningApart23(t *testing.T, shape string) *reasoningApart23 {
	t.Helper()
	u := &reasoningApart23{}
	const answer, reasoning = 40, 900
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // the harness's probe of its bucket
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		in := int64(strings.Count(string(raw), "word"))
		u.billed.Add(in + answer + reasoning)
		usage := fmt.Sprintf(shape, in, answer, reasoning, in+answer+reasoning)
		text := strings.TrimSpace(strings.Repeat("ok ", answer/2))
		stream := strings.Contains(string(raw), `"stream":true`)
		responses := strings.HasSuffix(r.URL.Path, "/responses")
		switch {
		case responses && !stream:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"r","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":%s}`, text, usage)
		case responses:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":%q}\n\n", text)
			fmt.Fprintf(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[],\"usage\":%s}}\n\n", usage)
		case !stream:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"grok-4","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":%s}`, text, usage)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", text)
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[],\"usage\":%s}\n\n", usage)
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// A usage whose details or total show output its output figure leaves
// out was charged the output figure alone: xAI's chat usage
// ({"prompt_tokens":10,"completion_tokens":40,"total_tokens":950,
// "completion_tokens_details":{"reasoning_tokens":900}}) settled at 50
// tokens a call, and 30 calls with "max_tokens":1000 went through a
// 10,000-token bucket billed 28,500. llmguard now charges the output at
// least the reasoning beside it when the reasoning is the larger
// (completion + reasoning), and at least total − input.
func TestAdv23ReasoningOutsideTheOutputIsCharged(t *testing.T) {
	prompt := strings.TrimSpace(strings.Repeat("word ", 10))
	for _, tc := range []struct{ name, path, body, shape string }{
		{"chat xAI json", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":%q}]}`,
			`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%[4]d,"completion_tokens_details":{"reasoning_tokens":%[3]d}}`},
		{"chat xAI stream", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":1000,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%q}]}`,
			`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%[4]d,"completion_tokens_details":{"reasoning_tokens":%[3]d}}`},
		{"chat total only", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":%q}]}`,
			`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%[4]d}`},
		{"chat reasoning only", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":%q}]}`,
			`{"prompt_tokens":%[1]d,"completion_tokens":%[2]d,"completion_tokens_details":{"reasoning_tokens":%[3]d}}`},
		{"completions", "/v1/completions",
			`{"model":"gpt-4o-mini","max_tokens":1000,"prompt":%q}`,
			`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%[4]d,"completion_tokens_details":{"reasoning_tokens":%[3]d}}`},
		{"responses json", "/v1/responses",
			`{"model":"gpt-4o-mini","max_output_tokens":1000,"input":%q}`,
			`{"input_tokens":%d,"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`},
		{"responses stream", "/v1/responses",
			`{"model":"gpt-4o-mini","max_output_tokens":1000,"stream":true,"input":%q}`,
			`{"input_tokens":%d,"output_tokens":%d,"total_tokens":%[4]d}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startReasoningApart23(t, tc.shape)
			h := fresh20(t, up.url, 10000)
			left := h.tokensLeft()
			body := fmt.Sprintf(tc.body, prompt)
			passed := 0
			for range 30 {
				resp, b := h.do(tc.path, body)
				switch {
				case resp.StatusCode == http.StatusOK:
					io.Copy(io.Discard, strings.NewReader(b))
					passed++
				case resp.StatusCode != http.StatusTooManyRequests:
					t.Fatalf("%d %.300s", resp.StatusCode, b)
				}
			}
			t.Logf("%d of 30 calls passed, billed %d through a bucket of %d", passed, up.billed.Load(), left)
			if billed := up.billed.Load(); billed > left {
				t.Errorf("the upstream billed %d tokens through a bucket holding %d (%d of 30 calls passed)", billed, left, passed)
			}
			if passed == 0 {
				t.Errorf("no call passed: one call of 950 tokens fits a 10,000-token bucket")
			}
		})
	}
}

// An Anthropic usage's cache_creation breakdown (ephemeral_5m and
// ephemeral_1h input tokens, the parts of cache_creation_input_tokens)
// was bounded by that total: a gateway that sends the breakdown alone
// ({"input_tokens":10,"cache_creation":{"ephemeral_1h_input_tokens":5000},
// "output_tokens":40}) settled 50 tokens for a call billed 5,050. The
// writes are now at least the breakdown's sum, JSON and streamed.
func TestAdv23CacheBreakdownIsCharged(t *testing.T) {
	const usage = `{"input_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":5000},"output_tokens":40}`
	var billed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			io.WriteString(w, `{"data":[]}`)
			return
		}
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		billed.Add(10 + 5000 + 40)
		if !strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":`+usage+`}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":"+usage+"}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	for _, stream := range []string{"", `"stream":true,`} {
		t.Run("stream="+fmt.Sprint(stream != ""), func(t *testing.T) {
			before := billed.Load()
			spent := zeroOutputCall(t, srv.URL, "", "/v1/messages", `{"model":"gpt-4o-mini",`+stream+`"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
			if got := billed.Load() - before; spent < got {
				t.Errorf("the call was billed %d tokens and charged %d", got, spent)
			}
		})
	}
}

// Perplexity's deep-research chat usage reports, beside prompt_tokens and
// completion_tokens (and a total_tokens of their sum), citation_tokens
// (billed at the input price), reasoning_tokens (billed apart from
// completion_tokens) and num_search_queries (billed per query): a call of
// 108 input and 3,256 output tokens with 7,299 citation and 73,248
// reasoning tokens was charged 3,364 tokens for 83,911 billed, 25 times
// fewer, and at gpt-4o-mini's prices no search. The citation tokens now
// count as input, the reasoning ones as output, the queries as web
// searches; JSON and streamed.
func TestAdv23PerplexityUsageIsCharged(t *testing.T) {
	const usage = `{"prompt_tokens":108,"completion_tokens":3256,"total_tokens":3364,"citation_tokens":7299,"num_search_queries":74,"reasoning_tokens":73248}`
	srv := cannedChatUpstream(t, `{"id":"p","object":"chat.completion","model":"sonar-deep-research","choices":[{"index":0,"message":{"role":"assistant","content":"report"},"finish_reason":"stop"}],"usage":`+usage+`}`,
		`data: {"id":"p","choices":[{"index":0,"delta":{"content":"report"}}]}`+"\n\n"+
			`data: {"id":"p","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":`+usage+"}\n\n"+
			"data: [DONE]\n\n")
	const billed = 108 + 3256 + 7299 + 73248
	for _, stream := range []string{"", `"stream":true,`} {
		t.Run("stream="+fmt.Sprint(stream != ""), func(t *testing.T) {
			spent := zeroOutputCall(t, srv.URL, "", "/v1/chat/completions", `{"model":"gpt-4o-mini",`+stream+`"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
			if spent < billed {
				t.Errorf("the call was billed %d tokens and charged %d", billed, spent)
			}
		})
	}
}

// LiteLLM's proxy answers a chat call to an Anthropic model with a usage
// whose prompt_tokens (in the versions that add only the cache reads to
// it) leaves out the cache writes it reports beside, as
// cache_creation_input_tokens: a call writing a 20,000-token prompt to
// the cache ({"prompt_tokens":4,"completion_tokens":40,
// "cache_creation_input_tokens":20000}) was charged 44 tokens for 20,044
// billed. Writes that do not fit in the prompt beside its cached reads
// are now added to it, and priced as cache writes; JSON and streamed.
func TestAdv23GatewayCacheWritesAreCharged(t *testing.T) {
	const usage = `{"prompt_tokens":4,"completion_tokens":40,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":0},"cache_creation_input_tokens":20000,"cache_read_input_tokens":0}`
	srv := cannedChatUpstream(t, `{"id":"l","object":"chat.completion","model":"claude-sonnet-4-5","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":`+usage+`}`,
		`data: {"id":"l","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"l","choices":[],"usage":`+usage+"}\n\n"+
			"data: [DONE]\n\n")
	const billed = 4 + 20000 + 40
	for _, stream := range []string{"", `"stream":true,"stream_options":{"include_usage":true},`} {
		t.Run("stream="+fmt.Sprint(stream != ""), func(t *testing.T) {
			spent := zeroOutputCall(t, srv.URL, "", "/v1/chat/completions", `{"model":"gpt-4o-mini",`+stream+`"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
			if spent < billed {
				t.Errorf("the call was billed %d tokens and charged %d", billed, spent)
			}
		})
	}
}

// cannedChatUpstream answers every chat call with jsonBody, or with
// sseBody (an event stream) when the request says "stream":true, and a
// GET (the harness's probe) with an empty list. Closed with the test.
func cannedChatUpstream(t *testing.T, jsonBody, sseBody string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			io.WriteString(w, `{"data":[]}`)
			return
		}
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, jsonBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseBody)
	}))
	t.Cleanup(srv.Close)
	return srv
}
