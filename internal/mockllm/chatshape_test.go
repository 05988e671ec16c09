package mockllm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// chatAnswer is the part of a chat.completion the shape tests read.
type chatAnswer struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

const weatherTool = `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}},{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`

// The body's n and tool_choice shape the answer: n choices, each a text
// reply or a call to the function tool_choice forces (the first for
// "required" or x-mock-tool-call; the named one), with usage counting every
// choice; a request that forces no tool gets text (trial5: an SDK user
// could not see a tool call or n > 1 choices through the mock).
func TestChatChoicesAndToolCalls(t *testing.T) {
	s := start(t)
	cases := []struct {
		name, body string
		hdr        map[string]string
		n          int
		tool       string // "" for text
	}{
		{"n=3 text", `{"model":"gpt-4o-mini","n":3,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, nil, 3, ""},
		{"required", `{"model":"gpt-4o-mini","max_tokens":5,` + weatherTool + `,"tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`, nil, 1, "lookup"},
		{"named, n=2", `{"model":"gpt-4o-mini","n":2,"max_tokens":5,` + weatherTool + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"messages":[{"role":"user","content":"hi"}]}`, nil, 2, "get_weather"},
		{"auto with x-mock-tool-call", `{"model":"gpt-4o-mini","max_tokens":5,` + weatherTool + `,"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"x-mock-tool-call": "1"}, 1, "lookup"},
		{"auto", `{"model":"gpt-4o-mini","max_tokens":5,` + weatherTool + `,"messages":[{"role":"user","content":"hi"}]}`, nil, 1, ""},
		{"none with x-mock-tool-call", `{"model":"gpt-4o-mini","max_tokens":5,` + weatherTool + `,"tool_choice":"none","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"x-mock-tool-call": "1"}, 1, ""},
		{"named tool not listed", `{"model":"gpt-4o-mini","max_tokens":5,` + weatherTool + `,"tool_choice":{"type":"function","function":{"name":"other"}},"messages":[{"role":"user","content":"hi"}]}`, nil, 1, ""},
		{"n=0 reads as 1", `{"model":"gpt-4o-mini","n":0,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, 1, ""},
	}
	for _, c := range cases {
		var a chatAnswer
		decode(t, post(t, s, "/v1/chat/completions", c.body, c.hdr), &a)
		if len(a.Choices) != c.n {
			t.Fatalf("%s: %d choices, want %d", c.name, len(a.Choices), c.n)
		}
		var perChoice int64 = -1
		for i, ch := range a.Choices {
			if ch.Index != i {
				t.Fatalf("%s: choice %d has index %d", c.name, i, ch.Index)
			}
			var words string
			if c.tool == "" {
				if ch.FinishReason != "stop" || ch.Message.Content == nil || len(ch.Message.ToolCalls) != 0 {
					t.Fatalf("%s: choice %d: finish %q, content %v, %d calls; want a text reply", c.name, i, ch.FinishReason, ch.Message.Content, len(ch.Message.ToolCalls))
				}
				words = *ch.Message.Content
			} else {
				if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
					t.Fatalf("%s: choice %d: finish %q, content %v, %d calls; want one call", c.name, i, ch.FinishReason, ch.Message.Content, len(ch.Message.ToolCalls))
				}
				call := ch.Message.ToolCalls[0]
				var args struct{ Input string }
				if call.Type != "function" || call.Function.Name != c.tool || !strings.HasPrefix(call.ID, "call_") || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil {
					t.Fatalf("%s: choice %d: call %+v, want a call of %s with JSON arguments", c.name, i, call, c.tool)
				}
				words = args.Input
			}
			got := int64(strings.Count(words, " ") + strings.Count(words, "."))
			if perChoice >= 0 && got != perChoice {
				t.Fatalf("%s: choice %d has %d words, choice 0 %d", c.name, i, got, perChoice)
			}
			perChoice = got
		}
		if a.Usage.CompletionTokens != perChoice*int64(c.n) || perChoice == 0 {
			t.Fatalf("%s: completion_tokens %d, want %d choices × %d words", c.name, a.Usage.CompletionTokens, c.n, perChoice)
		}
	}
}

// A streamed tool call sends the call's id and name once, then its
// arguments in pieces that join to the JSON answer's arguments, and ends
// with finish_reason tool_calls; every one of n choices streams under its
// index; usage counts them all, as the JSON answer's does, and the proxy's
// stream reader counts the arguments as streamed output.
func TestChatStreamChoicesAndToolCalls(t *testing.T) {
	s := start(t)
	for _, c := range []struct {
		name, fields string
		n            int
		tool         string
	}{
		{"tool, n=2", `"n":2,` + weatherTool + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}},`, 2, "get_weather"},
		{"text, n=3", `"n":3,`, 3, ""},
	} {
		body := `{"model":"gpt-4o-mini","max_tokens":6,` + c.fields + `"messages":[{"role":"user","content":"hi"}]}`
		var whole chatAnswer
		decode(t, post(t, s, "/v1/chat/completions", body, nil), &whole)
		stream := strings.Replace(body, `{"model"`, `{"stream":true,"stream_options":{"include_usage":true},"model"`, 1)
		r := post(t, s, "/v1/chat/completions", stream, nil)
		evs := events(r.body)
		got := make([]strings.Builder, c.n)
		finish := make([]string, c.n)
		names := make([]string, c.n)
		for _, e := range evs {
			if e.data == "[DONE]" {
				continue
			}
			var ch struct {
				Choices []struct {
					Index int `json:"index"`
					Delta struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							ID       string `json:"id"`
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(e.data), &ch); err != nil {
				t.Fatalf("%s: %v: %s", c.name, err, e.data)
			}
			for _, x := range ch.Choices {
				if x.Delta.Content != nil {
					got[x.Index].WriteString(*x.Delta.Content)
				}
				for _, tc := range x.Delta.ToolCalls {
					names[x.Index] += tc.Function.Name
					got[x.Index].WriteString(tc.Function.Arguments)
				}
				if x.FinishReason != nil {
					finish[x.Index] = *x.FinishReason
				}
			}
		}
		for i := range c.n {
			want := whole.Choices[i].Message.Content
			wantFinish := "stop"
			if c.tool != "" {
				want = &whole.Choices[i].Message.ToolCalls[0].Function.Arguments
				wantFinish = "tool_calls"
				if names[i] != c.tool {
					t.Fatalf("%s: choice %d calls %q, want %s once", c.name, i, names[i], c.tool)
				}
			}
			if got[i].String() != *want || finish[i] != wantFinish {
				t.Fatalf("%s: choice %d streamed %q (finish %q), JSON answer %q (%s)", c.name, i, got[i].String(), finish[i], *want, wantFinish)
			}
		}
		u, _, text := settle(weigher.KindChat, evs)
		if !u.Final || u.Usage.OutputTokens != whole.Usage.CompletionTokens || u.Usage.OutputTokens != int64(6*c.n) {
			t.Fatalf("%s: stream usage %d, JSON answer's %d, want %d", c.name, u.Usage.OutputTokens, whole.Usage.CompletionTokens, 6*c.n)
		}
		if c.tool != "" && !strings.Contains(text, " The quick") {
			t.Fatalf("%s: the proxy's stream reader saw %q, not the call's arguments", c.name, text)
		}
	}
}
