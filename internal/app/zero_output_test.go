package app

// A usage reporting 0 output tokens, in every flavor llmguard weighs, JSON
// and streamed, through real loopback sockets.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// zeroFlavors are the weighed endpoints that answer with text, each with a
// request body (max output 1000 tokens; "stream":true added when
// streamed: the chat and completions ones ask for include_usage).
var zeroFlavors = []struct{ path, body string }{
	{"/v1/chat/completions", `{"model":"%s","messages":[{"role":"user","content":"hi"}],"max_tokens":1000%s}`},
	{"/v1/completions", `{"model":"%s","prompt":"hi","max_tokens":1000%s}`},
	{"/v1/responses", `{"model":"%s","input":"hi","max_output_tokens":1000%s}`},
	{"/v1/messages", `{"model":"%s","messages":[{"role":"user","content":"hi"}],"max_tokens":1000%s}`},
}

// zeroFlavorBody is flavor f's request body for model, streamed or not.
func zeroFlavorBody(path, body, model string, stream bool) string {
	extra := ""
	if stream {
		extra = `,"stream":true`
		if path == "/v1/chat/completions" || path == "/v1/completions" {
			extra += `,"stream_options":{"include_usage":true}`
		}
	}
	return fmt.Sprintf(body, model, extra)
}

// zeroOutputEveryFlavor is an upstream that answers every flavor's call
// with a usage of prompt input tokens and 0 output tokens (an answer
// stopped at once, or by a content filter), carrying text as its output
// anyway (none when ""), and naming answerModel as its model: one JSON
// answer in the flavor's shape, or when the request streams, the flavor's
// SSE events (the text in one delta; a Messages stream's message_start
// carries the placeholder output_tokens 1 that its message_delta replaces
// by 0).
func zeroOutputEveryFlavor(t *testing.T, prompt int, text, answerModel string) string {
	t.Helper()
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		stream := strings.Contains(string(raw), `"stream":true`)
		chat := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":0,"total_tokens":%d}`, prompt, prompt)
		resp := fmt.Sprintf(`{"input_tokens":%d,"output_tokens":0,"total_tokens":%d}`, prompt, prompt)
		var events []string // SSE event names and data, in pairs
		var answer string
		switch r.URL.Path {
		case "/v1/chat/completions":
			answer = `{"id":"c","object":"chat.completion","model":` + q(answerModel) + `,"choices":[{"index":0,"message":{"role":"assistant","content":` + q(text) + `},"finish_reason":"content_filter"}],"usage":` + chat + `}`
			if text != "" {
				events = append(events, "", `{"id":"c","model":`+q(answerModel)+`,"choices":[{"index":0,"delta":{"content":`+q(text)+`}}]}`)
			}
			events = append(events, "", `{"id":"c","model":`+q(answerModel)+`,"choices":[],"usage":`+chat+`}`, "", "[DONE]")
		case "/v1/completions":
			answer = `{"id":"c","object":"text_completion","model":` + q(answerModel) + `,"choices":[{"index":0,"text":` + q(text) + `,"finish_reason":"content_filter"}],"usage":` + chat + `}`
			if text != "" {
				events = append(events, "", `{"id":"c","model":`+q(answerModel)+`,"choices":[{"index":0,"text":`+q(text)+`}]}`)
			}
			events = append(events, "", `{"id":"c","model":`+q(answerModel)+`,"choices":[],"usage":`+chat+`}`, "", "[DONE]")
		case "/v1/responses":
			content := `[]`
			if text != "" {
				content = `[{"type":"output_text","text":` + q(text) + `,"annotations":[]}]`
			}
			answer = `{"id":"r","object":"response","status":"completed","model":` + q(answerModel) + `,"output":[{"type":"message","id":"m","role":"assistant","content":` + content + `}],"usage":` + resp + `}`
			events = append(events, "response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress"}}`)
			if text != "" {
				events = append(events, "response.output_text.delta", `{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":`+q(text)+`}`)
			}
			events = append(events, "response.completed", `{"type":"response.completed","response":`+answer+`}`)
		case "/v1/messages":
			content := `[]`
			if text != "" {
				content = `[{"type":"text","text":` + q(text) + `}]`
			}
			answer = `{"id":"m","type":"message","role":"assistant","model":` + q(answerModel) + `,"content":` + content + `,"stop_reason":"end_turn","usage":{"input_tokens":` + fmt.Sprint(prompt) + `,"output_tokens":0}}`
			events = append(events, "message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":`+q(answerModel)+`,"content":[],"usage":{"input_tokens":`+fmt.Sprint(prompt)+`,"output_tokens":1}}}`)
			if text != "" {
				events = append(events,
					"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
					"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+q(text)+`}}`,
					"content_block_stop", `{"type":"content_block_stop","index":0}`)
			}
			events = append(events,
				"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}`,
				"message_stop", `{"type":"message_stop"}`)
		default:
			http.NotFound(w, r)
			return
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < len(events); i += 2 {
			if events[i] != "" {
				fmt.Fprintf(w, "event: %s\n", events[i])
			}
			fmt.Fprintf(w, "data: %s\n\n", events[i+1])
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// zeroOutputCall sends one call of the flavor at path to a fresh llmguard
// (a frozen clock, a 100,000-token daily bucket, tail added to the
// models) in front of upstream, of flavor anthropic for /v1/messages,
// and returns the tokens the bucket lost.
func zeroOutputCall(t *testing.T, upstream, tail, path, body string) int64 {
	t.Helper()
	yaml := baseConfig(t, upstream, tail+`limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`)
	if path == "/v1/messages" {
		yaml = strings.Replace(yaml, "flavor: openai", "flavor: anthropic", 1)
	}
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	h := frozenHarness(t, cfg)
	left := func() int64 { // the bucket, in the flavor's own header
		p := h.probe()
		if v := p.Get("anthropic-ratelimit-tokens-remaining"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("anthropic-ratelimit-tokens-remaining = %q: %v", v, err)
			}
			return n
		}
		return remainingTokens(t, p)
	}
	before := left()
	resp, b := h.do(path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.300s", resp.StatusCode, b)
	}
	return before - left()
}

// A Responses or Messages usage reporting output_tokens 0 was read as
// unreadable, so the call was charged its reservation (input estimate +
// max_output_tokens / max_tokens: 1,008 or so for "hi") and a larger
// reported input (500) was dropped; a Messages stream settled at
// message_start's placeholder output (1) where its message_delta said 0.
// Every flavor, JSON and streamed, now settles such a usage as reported
// (prompt 500, 0 output: 500) — never below the output text llmguard saw
// (200 words, 200 tokens, under output 0: prompt 10 + 200).
func TestZeroOutputSettlesAsReportedEveryFlavor(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 200)) // 200 o200k tokens
	for _, f := range zeroFlavors {
		for _, tc := range []struct {
			name   string
			prompt int
			text   string
			want   int64 // tokens the bucket must lose
		}{
			{"no text", 500, "", 500},
			{"text", 10, words, 10 + 200},
		} {
			for _, stream := range []bool{false, true} {
				name := f.path + " " + tc.name + map[bool]string{false: " json", true: " stream"}[stream]
				t.Run(name, func(t *testing.T) {
					up := zeroOutputEveryFlavor(t, tc.prompt, tc.text, "gpt-4o-mini")
					got := zeroOutputCall(t, up, "", f.path, zeroFlavorBody(f.path, f.body, "gpt-4o-mini", stream))
					if got != tc.want {
						t.Errorf("the bucket lost %d tokens, want %d (input %d, output 0, %d bytes of text)", got, tc.want, tc.prompt, len(tc.text))
					}
				})
			}
		}
	}
}

// The text of an answer reporting 0 output tokens is counted with the
// tokenizer of the model the request was weighed as (here one configured
// with cl100k_base), never with that of the model the answer names: an
// upstream's name may be anything, and one llmguard does not know falls
// to the default encoding (o200k_base), which counts this Hindi text in
// far fewer tokens. JSON and streamed, every flavor.
func TestZeroOutputCountedAsTheRequestModel(t *testing.T) {
	const model, hostile = "gpt-4-legacy", "totally-new-model-x"
	tail := "  " + model + ":\n    encoding: cl100k_base\n    input_usd_per_mtok: 30\n    output_usd_per_mtok: 60\n"
	text := strings.TrimSpace(strings.Repeat("नमस्ते दुनिया ", 40))
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", tail)))
	if err != nil {
		t.Fatal(err)
	}
	_, w, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, other := w.CountText(model, text), w.CountText(hostile, text)
	if want <= other {
		t.Fatalf("the text counts %d tokens as %s and %d as %s: the case tests nothing", want, model, other, hostile)
	}
	const prompt = 10
	for _, f := range zeroFlavors {
		for _, stream := range []bool{false, true} {
			name := f.path + map[bool]string{false: " json", true: " stream"}[stream]
			t.Run(name, func(t *testing.T) {
				up := zeroOutputEveryFlavor(t, prompt, text, hostile)
				got := zeroOutputCall(t, up, tail, f.path, zeroFlavorBody(f.path, f.body, model, stream))
				if got != prompt+want {
					t.Errorf("the bucket lost %d tokens, want %d (input %d + the text as %s, %d; as %s it is %d)",
						got, prompt+want, prompt, model, want, hostile, other)
				}
			})
		}
	}
}
