package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// cookbookMessages is the example conversation of OpenAI's cookbook "How to
// count tokens with tiktoken", section 6
// (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken;
// github.com/openai/openai-cookbook examples/How_to_count_tokens_with_tiktoken.ipynb).
const cookbookMessages = `[
  {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
  {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
  {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
  {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
  {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
  {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."}
]`

// cookbookTools and cookbookToolMessages are the example of the cookbook's
// section 7 "Counting tokens for chat completions with tool calls".
const (
	cookbookTools = `[{"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "description": "The unit of temperature to return", "enum": ["celsius", "fahrenheit"]}},
      "required": ["location"]}}}]`
	cookbookToolMessages = `[
  {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
  {"role": "user", "content": "What's the weather like in San Francisco?"}
]`
)

func TestChatCookbookPublishedCounts(t *testing.T) {
	w := testWeigher(t)
	// "N prompt tokens counted by the OpenAI API." in the cookbook's outputs.
	for _, tc := range []struct {
		name, model, extra string
		messages           string
		want               int64
	}{
		{"messages/gpt-3.5-turbo", "gpt-3.5-turbo", "", cookbookMessages, 129},
		{"messages/gpt-4-0613", "gpt-4-0613", "", cookbookMessages, 129},
		{"messages/gpt-4", "gpt-4", "", cookbookMessages, 129},
		{"messages/gpt-4o", "gpt-4o", "", cookbookMessages, 124},
		{"messages/gpt-4o-mini", "gpt-4o-mini", "", cookbookMessages, 124},
		{"tools/gpt-3.5-turbo", "gpt-3.5-turbo", `,"tools":` + cookbookTools, cookbookToolMessages, 105},
		{"tools/gpt-4", "gpt-4", `,"tools":` + cookbookTools, cookbookToolMessages, 105},
		{"tools/gpt-4o", "gpt-4o", `,"tools":` + cookbookTools, cookbookToolMessages, 101},
		{"tools/gpt-4o-mini", "gpt-4o-mini", `,"tools":` + cookbookTools, cookbookToolMessages, 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":%q,"messages":%s,"temperature":0,"max_tokens":1%s}`, tc.model, tc.messages, tc.extra)
			e := w.Chat([]byte(body))
			if !e.Parsed || e.Model != tc.model {
				t.Fatalf("Chat: Parsed=%v Model=%q", e.Parsed, e.Model)
			}
			if e.InputTokens != tc.want {
				t.Errorf("InputTokens = %d, want %d (OpenAI's published prompt_tokens)", e.InputTokens, tc.want)
			}
		})
	}
}

func TestChatLegacyFunctionsCountLikeTools(t *testing.T) {
	w := testWeigher(t)
	fn := cookbookTools[strings.Index(cookbookTools, `"function": {`)+len(`"function": `) : strings.LastIndex(cookbookTools, "}]")]
	tools := w.Chat([]byte(`{"model":"gpt-4o","messages":` + cookbookToolMessages + `,"tools":` + cookbookTools + `}`))
	funcs := w.Chat([]byte(`{"model":"gpt-4o","messages":` + cookbookToolMessages + `,"functions":[` + fn + `]}`))
	if tools.InputTokens != funcs.InputTokens {
		t.Errorf("functions: %d tokens, tools: %d; want equal", funcs.InputTokens, tools.InputTokens)
	}
}

func TestChatContentParts(t *testing.T) {
	w := testWeigher(t)
	plain := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hello there, how are you?"}]}`))
	parts := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"Hello there, how are you?"}]}]}`))
	if plain.InputTokens != parts.InputTokens {
		t.Errorf("text part: %d tokens, string content: %d; want equal", parts.InputTokens, plain.InputTokens)
	}
	withImage := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"Hello there, how are you?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}}]}]}`))
	if got, want := withImage.InputTokens-plain.InputTokens, int64(85); got != want {
		t.Errorf("low-detail image on gpt-4o adds %d tokens, want %d", got, want)
	}
	unknown := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`))
	empty := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[]}]}`))
	if got, want := unknown.InputTokens-empty.InputTokens, int64(85+8*170); got != want {
		t.Errorf("image of unknown size on gpt-4o adds %d tokens, want %d (8 tiles)", got, want)
	}
	data := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pngDataURL(t, 1024, 1024) + `","detail":"high"}}]}]}`))
	if got, want := data.InputTokens-empty.InputTokens, int64(765); got != want {
		t.Errorf("1024×1024 data: URL on gpt-4o adds %d tokens, want %d", got, want)
	}
}

func TestChatToolCallsAndToolMessages(t *testing.T) {
	w := testWeigher(t)
	base := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"assistant","content":null}]}`))
	call := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Paris\"}"}}]}]}`))
	enc := w.encoder("gpt-4o")
	want := tokensPerToolCall + countText(enc, "get_current_weather") + countText(enc, `{"location":"Paris"}`)
	if got := call.InputTokens - base.InputTokens; got != want {
		t.Errorf("tool call adds %d tokens, want %d", got, want)
	}
	tool := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"call_1","content":"22 degrees and sunny"}]}`))
	want = tokensPerMessage + countText(enc, "tool") + countText(enc, "22 degrees and sunny") + tokensReply
	if tool.InputTokens != want {
		t.Errorf("tool message: %d tokens, want %d", tool.InputTokens, want)
	}
}

func TestChatOutputReservation(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, body string
		want       int64
	}{
		{"max_tokens", `{"model":"gpt-4o","messages":[],"max_tokens":100}`, 100},
		{"max_completion_tokens", `{"model":"gpt-4o","messages":[],"max_completion_tokens":200}`, 200},
		{"both: the larger", `{"model":"gpt-4o","max_tokens":100,"messages":[],"max_completion_tokens":200}`, 200},
		{"n times max_tokens", `{"model":"gpt-4o","messages":[],"max_tokens":100,"n":3}`, 300},
		{"n=0 is 1", `{"model":"gpt-4o","messages":[],"max_tokens":100,"n":0}`, 100},
		{"n null is 1", `{"model":"gpt-4o","messages":[],"max_tokens":100,"n":null}`, 100},
		{"model default", `{"model":"gpt-4o","messages":[]}`, 4096},
		{"model default, dated snapshot", `{"model":"gpt-4o-2024-08-06","messages":[]}`, 4096},
		{"longest configured prefix", `{"model":"gpt-4o-mini-2024-07-18","messages":[]}`, 2048},
		{"model default times n", `{"model":"gpt-4o","messages":[],"n":2}`, 8192},
		{"unknown model: options default", `{"model":"llama-3","messages":[]}`, 1000},
		{"no model: options default", `{"messages":[]}`, 1000},
		{"negative max_tokens ignored", `{"model":"gpt-4o","messages":[],"max_tokens":-5}`, 4096},
		{"numeric string max_tokens counts (lenient upstreams coerce it)", `{"model":"gpt-4o","messages":[],"max_tokens":"100"}`, 100},
		{"non-numeric string max_tokens ignored", `{"model":"gpt-4o","messages":[],"max_tokens":"lots"}`, 4096},
		{"both: the larger, whichever it is", `{"model":"gpt-4o","max_tokens":300,"messages":[],"max_completion_tokens":200}`, 300},
		{"max_completion_tokens 0 does not hide max_tokens", `{"model":"gpt-4o","max_completion_tokens":0,"messages":[],"max_tokens":100000}`, 100000},
		{"numeric string n counts", `{"model":"gpt-4o","messages":[],"max_tokens":10,"n":"3"}`, 30},
		// 0 is no cap to gateways that drop zero fields or read 0 as unset:
		// the model's default is reserved.
		{"zero max_tokens reads as unset", `{"model":"gpt-4o","messages":[],"max_tokens":0}`, 4096},
		{"huge figures saturate", `{"model":"gpt-4o","messages":[],"max_tokens":1e300,"n":1e300}`, maxTokens},
	} {
		if got := w.Chat([]byte(tc.body)).OutputTokens; got != tc.want {
			t.Errorf("%s: OutputTokens = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestChatStreamFlags(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		body                 string
		stream, includeUsage bool
	}{
		{`{"model":"gpt-4o","messages":[]}`, false, false},
		{`{"model":"gpt-4o","messages":[],"stream":true}`, true, false},
		{`{"model":"gpt-4o","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{`{"model":"gpt-4o","messages":[],"stream":true,"stream_options":{"include_usage":false}}`, true, false},
		// A lenient upstream (pydantic's lax mode: vLLM) streams for
		// "yes": the request is a stream, whose usage the proxy asks for
		// (TestLenientStreamFlag).
		{`{"model":"gpt-4o","messages":[],"stream":"yes"}`, true, false},
		{`{"model":"gpt-4o","messages":[],"stream":"no"}`, false, false},
	} {
		e := w.Chat([]byte(tc.body))
		if e.Stream != tc.stream || e.IncludeUsage != tc.includeUsage {
			t.Errorf("%s: Stream=%v IncludeUsage=%v, want %v %v", tc.body, e.Stream, e.IncludeUsage, tc.stream, tc.includeUsage)
		}
	}
}

func TestChatFallback(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name  string
		body  []byte
		fault Fault
	}{
		{"empty", nil, FaultInvalidJSON},
		{"not JSON", []byte("model=gpt-4o&messages=hello"), FaultInvalidJSON},
		{"truncated", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"`), FaultInvalidJSON},
		{"array", []byte(`[1,2,3]`), FaultNotObject},
		{"string", []byte(`"hello"`), FaultNotObject},
		{"invalid UTF-8 bytes", []byte{0xff, 0xfe, 0x00, '{'}, FaultNotUTF8},
	} {
		e := w.Chat(tc.body)
		want := Estimate{InputTokens: int64(len(tc.body)+1) / 2, OutputTokens: 1000, Fault: tc.fault}
		e.FaultDetail = ""
		if e != want {
			t.Errorf("%s: Chat = %+v, want %+v", tc.name, e, want)
		}
	}
	if e := w.Bytes(make([]byte, 101), "gpt-4o"); e.InputTokens != 51 || e.OutputTokens != 4096 || e.Parsed || e.Model != "gpt-4o" {
		t.Errorf("Bytes(101 bytes, gpt-4o) = %+v", e)
	}
}

func TestChatModelDoesNotAliasBody(t *testing.T) {
	w := testWeigher(t)
	body := []byte(`{"model":"gpt-4o","messages":[]}`)
	e := w.Chat(body)
	copy(body, strings.Repeat("x", len(body)))
	if e.Model != "gpt-4o" {
		t.Errorf("Model changed with the body: %q", e.Model)
	}
}
