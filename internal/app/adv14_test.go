package app

// Adversarial tests of the fourth review (2026-12-03, evening): each drives
// llmguard through real loopback sockets to an upstream that bills what it
// reads and fails where the upstream billed more than llmguard admitted.

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// vllmUpstream renders a chat (or chat-style embeddings) body into its
// prompt as vLLM's OpenAI-compatible server does with a chat template
// (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html,
// extra parameters): the messages' text, every string of "tools" (chat
// templates write each tool as its JSON), every string of "documents" (a
// RAG template writes each document out) and of "chat_template_kwargs"
// (variables the template writes out), and, for a request that brings its
// own "chat_template", that template's output — here a template that
// writes the rest 1,000 times, as "{% for i in range(1000) %}…{% endfor %}"
// would — up to the model's input window. It bills one input token a word of the prompt (every word of the
// tests' text is one token or more to tiktoken) and reports it, so the
// tokens it billed are what llmguard must have weighed.
type vllmUpstream struct {
	url    string
	billed atomic.Int64
}

func startVLLM(t *testing.T) *vllmUpstream {
	t.Helper()
	u := &vllmUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// frozenHarness starts llmguard on cfg, logging nowhere, on a clock that
// never moves: a bucket admits at most its burst.
func frozenHarness(t *testing.T, cfg *config.Config) *harness {
	t.Helper()
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
}

// frozenClaude is frozenHarness on claudeConfig(upstreamURL, limit, burst).
func frozenClaude(t *testing.T, upstreamURL, limit string, burst int) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(claudeConfig(upstreamURL, limit, burst)))
	if err != nil {
		t.Fatal(err)
	}
	return frozenHarness(t, cfg)
}

// callThrough sends body to path calls times through h and fails t when
// up billed more tokens over them than left, what the bucket held before;
// it returns how many calls passed (200). Any status but 200 and 429
// fails t at once.
func (up *vllmUpstream) callThrough(t *testing.T, h *harness, path, body string, calls int, left int64) (passed int) {
	t.Helper()
	before := up.billed.Load()
	for range calls {
		resp, b := h.do(path, body)
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%d %.200s", resp.StatusCode, b)
		}
	}
	if billed := up.billed.Load() - before; billed > left {
		t.Errorf("the upstream billed %d tokens through a bucket holding %d (%d of %d calls passed)", billed, left, passed, calls)
	}
	return passed
}

// strings of v, a decoded JSON value, appended to b with spaces between.
func appendStrings(b *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		b.WriteString(" " + v)
	case []any:
		for _, e := range v {
			appendStrings(b, e)
		}
	case map[string]any:
		for _, e := range v {
			appendStrings(b, e)
		}
	}
}

func (u *vllmUpstream) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var body struct {
		Messages     any    `json:"messages"`
		Documents    any    `json:"documents"`
		Kwargs       any    `json:"chat_template_kwargs"`
		Tools        any    `json:"tools"`
		ChatTemplate string `json:"chat_template"`
	}
	json.Unmarshal(raw, &body)
	var prompt strings.Builder
	appendStrings(&prompt, body.Messages)
	appendStrings(&prompt, body.Documents)
	appendStrings(&prompt, body.Kwargs)
	appendStrings(&prompt, body.Tools) // templates write each tool as its JSON (tojson)
	words := int64(len(strings.Fields(prompt.String())))
	if body.ChatTemplate != "" {
		words *= 1000
	}
	// No prompt is longer than the model's window (the price table's
	// max_input_tokens): vLLM refuses one that is.
	window := int64(128000)
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		window = 8191
	}
	words = min(words, window)
	u.billed.Add(words)
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/messages") {
		u.billed.Add(1)
		fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":%d,"output_tokens":1}}`, words)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"model":"text-embedding-3-small","usage":{"prompt_tokens":%d,"total_tokens":%d}}`, words, words)
		return
	}
	u.billed.Add(1) // the one output token max_tokens allows
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d}}`, words, words+1)
}

// vLLM's chat extra parameters that its chat template writes into the
// prompt it bills — "documents", "chat_template_kwargs", and a
// "chat_template" of the request's own — were weighed as nothing: a chat
// body of "hi" and 3,000 words of documents reserved 8 input tokens and
// was billed 3,002, so a 20,000-token bucket let 21,029 tokens through
// (its seventh call passed on the room six calls left and went into debt),
// and a 90-byte template looping over a 200-word prompt was billed the
// model's whole window, 128,001 tokens, through the same bucket. The documents and the template's
// variables are now counted as text, and a template of the request's own
// is hidden context (the model's whole input window reserved: gpt-4o-mini's
// 128,000 can never fit this bucket, so it is refused 429 without a take).
// The chat-style embeddings of vLLM take the same template fields (8,191
// tokens reserved for a template: two calls fit).
func TestAdv14VLLMTemplateInputIsWeighed(t *testing.T) {
	up := startVLLM(t)
	// Each case gets llmguard afresh, on a clock that never moves: its
	// bucket admits at most its 20,000 tokens.
	fresh := func(t *testing.T) *harness {
		cfg, err := config.Parse([]byte(baseConfig(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)))
		if err != nil {
			t.Fatal(err)
		}
		return frozenHarness(t, cfg)
	}
	words := strings.Repeat("word ", 3000)
	chat := func(extra string) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1` + extra + `}`
	}
	for _, tc := range []struct {
		name, path, body string
		calls            int
		refused          bool // every call is refused 429 (can never fit)
	}{
		{"documents", "/v1/chat/completions", chat(`,"documents":[{"title":"notes","text":"` + words + `"}]`), 10, false},
		{"chat_template_kwargs", "/v1/chat/completions", chat(`,"chat_template_kwargs":{"enable_thinking":false,"system_text":"` + words + `"}`), 10, false},
		{"chat_template", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + words[:1000] + `"}],"max_tokens":1,` +
			`"chat_template":"{% for i in range(1000) %}{% for m in messages %}{{ m.content }}{% endfor %}{% endfor %}"}`, 3, true},
		{"embeddings chat_template", "/v1/embeddings", `{"model":"text-embedding-3-small","messages":[{"role":"user","content":"` + words[:500] + `"}],"chat_template":"{% for i in range(1000) %}{{ messages[0].content }}{% endfor %}"}`, 4, false},
		{"embeddings chat_template_kwargs", "/v1/embeddings", `{"model":"text-embedding-3-small","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"extra":"` + words + `"}}`, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh(t)
			passed := up.callThrough(t, h, tc.path, tc.body, tc.calls, h.tokensLeft())
			if tc.refused && passed > 0 {
				t.Errorf("%d of %d calls passed, want each refused", passed, tc.calls)
			}
			if !tc.refused && passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// A tool definition was weighed by the cookbook's rule alone (name,
// description, and per property its key, type, description and enum):
// every other member — a schema's anyOf, $defs, title, examples, default,
// an extension member, the tool object's own description beside its
// function — was weighed as nothing, while an OpenAI-compatible server's
// chat template writes the whole tool as JSON into the prompt it bills.
// 3,000 words in a parameter's "examples" reserved 27 tokens for the
// tools; through a 20,000-token bucket the upstream billed 21,015. Such
// members are now counted as their text ("key:value"), all but the
// structure every tool has (a type name, a boolean strict or
// additionalProperties, a required list no longer than the properties).
func TestAdv14ToolSchemaMembersAreWeighed(t *testing.T) {
	up := startVLLM(t)
	words := strings.Repeat("word ", 3000)
	tool := func(fn string) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"tools":[` + fn + `]}`
	}
	for _, tc := range []struct{ name, body string }{
		{"examples", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","examples":["` + words + `"]}}}}}`)},
		{"anyOf", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"anyOf":[{"type":"string","description":"` + words + `"}]}}}}}`)},
		{"$defs", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","$defs":{"d":{"description":"` + words + `"}}}}}`)},
		{"title", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","title":"` + words + `","properties":{}}}}`)},
		{"default in items", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","default":"` + words + `"}}}}}}`)},
		{"extension member", tool(`{"type":"function","function":{"name":"f","x-notes":"` + words + `"}}`)},
		{"tool's own description", tool(`{"type":"function","description":"` + words + `","function":{"name":"f"}}`)},
		{"required", tool(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":["` + words + `"]}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(baseConfig(t, up.url, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			passed := up.callThrough(t, h, "/v1/chat/completions", tc.body, 10, h.tokensLeft())
			if passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// An Anthropic tool's input_examples — example inputs the Messages API
// writes into the tool definitions of the system prompt it builds
// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools)
// — were weighed as nothing: 3,000 words of them reserved the tool's name
// and schema alone, and a 20,000-token bucket let the upstream bill
// 21,014 tokens. They are now counted as the text of their JSON.
func TestAdv14AnthropicToolInputExamplesAreWeighed(t *testing.T) {
	up := startVLLM(t)
	h := frozenClaude(t, up.url, "user-tpm", 20000)
	words := strings.Repeat("word ", 3000)
	body := `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"},"input_examples":[{"q":"` + words + `"}]}]}`
	const left = 20000 // a fresh bucket on a frozen clock
	passed := up.callThrough(t, h, "/v1/messages", body, 10, left)
	if passed == 0 {
		t.Errorf("no call passed: the case tests nothing")
	}
}
