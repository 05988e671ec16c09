package mockllm

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

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

// A Responses or Messages request that forces a function tool gets a call
// of it in its API's shape — a function_call output item, a tool_use block
// with stop_reason tool_use — whose streamed pieces (function_call_arguments
// deltas, input_json_delta) join to the JSON answer's arguments; usage
// matches, and the proxy's stream reader counts the pieces as output. A
// request that forces none gets text.
func TestResponsesAndMessagesToolCalls(t *testing.T) {
	s := start(t)
	respTools := `"tools":[{"type":"web_search"},{"type":"function","name":"lookup","parameters":{"type":"object"}},{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
	msgTools := `"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"lookup","input_schema":{"type":"object"}},{"type":"custom","name":"get_weather","input_schema":{"type":"object"}}]`
	type call struct{ name, args string }
	// answer reads the JSON answer's call ("" name: text) and output tokens.
	answer := func(t *testing.T, kind weigher.Kind, body []byte) (call, int64) {
		t.Helper()
		var a struct {
			Output []struct {
				Type, Name, Arguments string
				CallID                string `json:"call_id"`
			} `json:"output"`
			Content []struct {
				Type, Name string
				Input      json.RawMessage `json:"input"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		u, _ := weigher.ParseUsage(kind, body)
		var c call
		if kind == weigher.KindResponses {
			if len(a.Output) != 1 {
				t.Fatalf("%d output items: %s", len(a.Output), body)
			}
			if o := a.Output[0]; o.Type == "function_call" && strings.HasPrefix(o.CallID, "call_") {
				c = call{o.Name, o.Arguments}
			} else if o.Type != "message" {
				t.Fatalf("output %+v", o)
			}
			return c, u.OutputTokens
		}
		if len(a.Content) != 1 {
			t.Fatalf("%d blocks: %s", len(a.Content), body)
		}
		switch b := a.Content[0]; {
		case b.Type == "tool_use" && a.StopReason == "tool_use":
			c = call{b.Name, string(b.Input)}
		case b.Type != "text" || a.StopReason != "end_turn":
			t.Fatalf("block %s, stop %s", b.Type, a.StopReason)
		}
		return c, u.OutputTokens
	}
	for _, c := range []struct {
		name, path, body string
		hdr              map[string]string
		kind             weigher.Kind
		tool             string
	}{
		{"responses required", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":5,` + respTools + `,"tool_choice":"required","input":"hi"}`, nil, weigher.KindResponses, "lookup"},
		{"responses named", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":5,` + respTools + `,"tool_choice":{"type":"function","name":"get_weather"},"input":"hi"}`, nil, weigher.KindResponses, "get_weather"},
		{"responses auto + header", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":5,` + respTools + `,"input":"hi"}`, map[string]string{"x-mock-tool-call": "1"}, weigher.KindResponses, "lookup"},
		{"responses auto", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":5,` + respTools + `,"input":"hi"}`, nil, weigher.KindResponses, ""},
		{"messages any", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,` + msgTools + `,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`, nil, weigher.KindMessages, "lookup"},
		{"messages named", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,` + msgTools + `,"tool_choice":{"type":"tool","name":"get_weather"},"messages":[{"role":"user","content":"hi"}]}`, nil, weigher.KindMessages, "get_weather"},
		{"messages none + header", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,` + msgTools + `,"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"x-mock-tool-call": "1"}, weigher.KindMessages, ""},
		{"messages server tool only", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`, nil, weigher.KindMessages, ""},
	} {
		r := post(t, s, c.path, c.body, c.hdr)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		got, out := answer(t, c.kind, r.body)
		if got.name != c.tool || out != 5 {
			t.Fatalf("%s: calls %q with %s, %d output tokens; want %q, 5", c.name, got.name, got.args, out, c.tool)
		}
		if c.tool == "" {
			continue
		}
		var args struct{ Input string }
		if err := json.Unmarshal([]byte(got.args), &args); err != nil || args.Input != " The quick brown fox jumps" {
			t.Fatalf("%s: arguments %s (%v)", c.name, got.args, err)
		}
		stream := strings.Replace(c.body, `{"model"`, `{"stream":true,"model"`, 1)
		evs := events(post(t, s, c.path, stream, c.hdr).body)
		var pieces strings.Builder
		var last string
		for _, e := range evs {
			var ev struct {
				Type  string
				Delta json.RawMessage
				Item  *struct{ Type, Name, Arguments string }
			}
			json.Unmarshal([]byte(e.data), &ev)
			switch ev.Type {
			case "response.function_call_arguments.delta":
				var d string
				json.Unmarshal(ev.Delta, &d)
				pieces.WriteString(d)
			case "content_block_delta":
				var d struct {
					Type        string
					PartialJSON string `json:"partial_json"`
				}
				json.Unmarshal(ev.Delta, &d)
				if d.Type != "input_json_delta" {
					t.Fatalf("%s: delta %s", c.name, ev.Delta)
				}
				pieces.WriteString(d.PartialJSON)
			case "response.output_item.done":
				if ev.Item.Type != "function_call" || ev.Item.Name != c.tool || ev.Item.Arguments != got.args {
					t.Fatalf("%s: item done %+v", c.name, ev.Item)
				}
			case "message_delta":
				var d struct {
					StopReason string `json:"stop_reason"`
				}
				json.Unmarshal(ev.Delta, &d)
				last = d.StopReason
			case "response.completed":
				last = "completed"
			}
		}
		if pieces.String() != got.args {
			t.Fatalf("%s: streamed arguments %q, JSON answer's %q", c.name, pieces.String(), got.args)
		}
		if want := map[weigher.Kind]string{weigher.KindResponses: "completed", weigher.KindMessages: "tool_use"}[c.kind]; last != want {
			t.Fatalf("%s: stream ended %q, want %q", c.name, last, want)
		}
		u, _, text := settle(c.kind, evs)
		if !u.Final || u.Usage.OutputTokens != 5 || !strings.Contains(text, " The quick brown fox jumps") {
			t.Fatalf("%s: the proxy's stream reader: usage %+v, text %q", c.name, u, text)
		}
	}
}

// FuzzToolAnswers sends the mock's chat, Responses and Messages handlers
// bodies whose n, tools and tool_choice are any JSON values: every answer
// is JSON with as many choices as n asks (1..maxChoices) and, whatever
// call it makes, arguments that parse as JSON.
func FuzzToolAnswers(f *testing.F) {
	f.Add(`3`, `[{"type":"function","function":{"name":"a"},"name":"a"}]`, `"required"`)
	f.Add(`1`, `[{"type":"function","function":{"name":"a\"b"},"name":"\u0000"}]`, `{"type":"function","function":{"name":"a\"b"},"name":"\u0000"}`)
	f.Add(`-5`, `{"name":"x"}`, `{"type":"any"}`)
	f.Add(`1e9`, `[{"name":"t"},{"type":"custom","name":"u"}]`, `{"type":"tool","name":"u"}`)
	f.Add(`"2"`, `[1,null,"x",[]]`, `"none"`)
	s, err := Start("127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, n, tools, choice string) {
		for _, v := range []string{n, tools, choice} {
			if !json.Valid([]byte(v)) || len(v) > 4096 {
				return
			}
		}
		var wantN int64 = 1
		if v := strings.TrimSpace(n); v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			num, _ := strconv.ParseFloat(v, 64) // ±Inf past float64's range: the most, or 1
			wantN = int64(max(1, min(num, maxChoices)))
		}
		for _, h := range []struct {
			kind weigher.Kind
			body string
			call func(ctx *fasthttp.RequestCtx)
		}{
			{weigher.KindChat, `{"model":"gpt-4o-mini","max_tokens":3,"n":` + n + `,"tools":` + tools + `,"tool_choice":` + choice + `,"messages":[{"role":"user","content":"hi"}]}`,
				func(ctx *fasthttp.RequestCtx) { s.chat(ctx, flavorOpenAI) }},
			{weigher.KindResponses, `{"model":"gpt-4o","max_output_tokens":3,"tools":` + tools + `,"tool_choice":` + choice + `,"input":"hi"}`, s.responses},
			{weigher.KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":3,"tools":` + tools + `,"tool_choice":` + choice + `,"messages":[{"role":"user","content":"hi"}]}`, s.messages},
		} {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.Header.Set("x-mock-tool-call", "1")
			ctx.Request.SetBodyString(h.body)
			h.call(&ctx)
			body := ctx.Response.Body()
			var a struct {
				Choices []struct {
					Message struct {
						ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
					}
				}
				Output  []struct{ Type, Arguments string }
				Content []struct {
					Type  string
					Input json.RawMessage
				}
			}
			if ctx.Response.StatusCode() != 200 || json.Unmarshal(body, &a) != nil {
				if ctx.Response.StatusCode() == 400 {
					continue // a body the weigher refuses as the API would (a key twice…)
				}
				t.Fatalf("%v: %d %s\nrequest %s", h.kind, ctx.Response.StatusCode(), body, h.body)
			}
			var args []string
			for _, c := range a.Choices {
				for _, tc := range c.Message.ToolCalls {
					args = append(args, tc.Function.Arguments)
				}
			}
			for _, o := range a.Output {
				if o.Type == "function_call" {
					args = append(args, o.Arguments)
				}
			}
			for _, b := range a.Content {
				if b.Type == "tool_use" {
					args = append(args, string(b.Input))
				}
			}
			if h.kind == weigher.KindChat && int64(len(a.Choices)) != wantN {
				t.Fatalf("n %s: %d choices, want %d", n, len(a.Choices), wantN)
			}
			for _, x := range args {
				if !json.Valid([]byte(x)) {
					t.Fatalf("%v: arguments %q are not JSON", h.kind, x)
				}
			}
		}
	})
}
