package app

// Adversarial tests of the twelfth red-team round (2026-12-05): each
// drives llmguard through real loopback sockets to an upstream that bills
// every word of the members it reads (a lenient OpenAI- or
// Anthropic-compatible server whose prompt template writes a message,
// item or prediction out as its JSON), and fails where the upstream
// billed more than the bucket held.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Members the APIs define as carrying no billed text (an id, a type, a
// status, an index, a cache_control) weighed nothing whatever they held,
// and a Predicted Outputs prediction was weighed by its text alone:
// 3,000 words in a tool call's "id", a Responses item's "status", a
// reasoning_details item's "format" or beside a prediction's "content"
// went seven times through a 20,000-token bucket, billed 21,0xx by an
// upstream that writes them into the prompt. A framing member whose JSON
// is longer than any the official API takes (64 bytes), and a member no
// API defines inside a prediction, are now weighed by their text.
func TestAdv12FramingAndPredictionMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["input"], body["instructions"], body["prediction"], body["system"], body["tools"], body["tool_choice"]), 1
	})
	W := `"` + words16 + `"`
	chat := func(msgs, rest string) string {
		return `{"model":"gpt-4o-mini","max_tokens":1,` + rest + `"messages":[` + msgs + `]}`
	}
	responses := func(input string) string {
		return `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[` + input + `]}`
	}
	claude := func(rest string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":1,` + rest + `}`
	}
	user := `{"role":"user","content":"hi"}`
	reasoning := func(details string) string {
		return chat(user+`,{"role":"assistant","content":"ok","reasoning_details":[`+details+`]},`+user, ``)
	}
	calls := func(call, result string) string {
		return chat(user+`,{"role":"assistant","tool_calls":[`+call+`]},`+result, ``)
	}
	result := `{"role":"tool","tool_call_id":"c","content":"ok"}`
	fc := `{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`
	tool := `{"name":"f","description":"d","input_schema":{"type":"object"}}`
	for _, tc := range []struct{ name, path, body string }{
		{"prediction part member", "/v1/chat/completions", chat(user, `"prediction":{"type":"content","content":[{"type":"text","text":"hi","note":`+W+`}]},`)},
		{"prediction member", "/v1/chat/completions", chat(user, `"prediction":{"type":"content","content":"hi","note":`+W+`},`)},
		{"prediction type", "/v1/chat/completions", chat(user, `"prediction":{"type":`+W+`,"content":"hi"},`)},
		{"reasoning_details id", "/v1/chat/completions", reasoning(`{"type":"reasoning.text","text":"hi","id":` + W + `}`)},
		{"reasoning_details type", "/v1/chat/completions", reasoning(`{"type":` + W + `,"text":"hi"}`)},
		{"reasoning_details format", "/v1/chat/completions", reasoning(`{"type":"reasoning.text","format":` + W + `,"text":"hi"}`)},
		{"reasoning_details nested id", "/v1/chat/completions", reasoning(`{"type":"reasoning.text","text":"hi","x":{"id":` + W + `}}`)},
		{"reasoning_details index", "/v1/chat/completions", reasoning(`{"type":"reasoning.text","text":"hi","index":` + W + `}`)},
		{"reasoning object id", "/v1/chat/completions", chat(user+`,{"role":"assistant","content":"ok","reasoning":{"type":"x","id":`+W+`}},`+user, ``)},
		{"chat tool_call_id", "/v1/chat/completions", calls(`{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`, `{"role":"tool","tool_call_id":`+W+`,"content":"ok"}`)},
		{"chat call id", "/v1/chat/completions", calls(`{"id":`+W+`,"type":"function","function":{"name":"f","arguments":"{}"}}`, result)},
		{"chat call type", "/v1/chat/completions", calls(`{"id":"c","type":`+W+`,"function":{"name":"f","arguments":"{}"}}`, result)},
		{"chat part cache_control", "/v1/chat/completions", chat(`{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","t":`+W+`}}]}`, ``)},
		{"responses item id", "/v1/responses", responses(`{"role":"user","content":"hi","id":` + W + `}`)},
		{"responses item status", "/v1/responses", responses(`{"type":"message","role":"user","content":"hi","status":` + W + `}`)},
		{"responses call_id", "/v1/responses", responses(`{"type":"function_call","call_id":` + W + `,"name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}`)},
		{"responses output call_id", "/v1/responses", responses(fc + `,{"type":"function_call_output","call_id":` + W + `,"output":"ok"}`)},
		{"messages tool_use block id", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":` + W + `,"name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]`)},
		{"messages tool_use_id", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":` + W + `,"content":"ok"}]}]`)},
		{"messages block cache_control", "/v1/messages", claude(`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","t":` + W + `}}]}]`)},
		{"messages tool strict", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},"strict":` + W + `}]`)},
		{"messages tool_choice name", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"tool","name":` + W + `}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, up.url, "user-tpd", 20000)
			} else {
				h = fresh16(t, up.url)
			}
			if passed := up.callThrough(t, h, tc.path, tc.body, 10, 20000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// An answer whose usage reports a small output beside much more text
// (5 output tokens for 3,000 words: a lenient upstream, a gateway that
// rewrites usage) was charged the usage as reported: only a report of 0
// had its text counted. Upstream usage is the bill, but not one the
// answer it came with contradicts: an answer (a JSON body, or a stream's
// text) longer than 6 bytes a reported token plus 1 KiB has its text
// counted, and is charged at least that.
func TestAdv12SmallOutputBesideMuchTextChargedTheText(t *testing.T) {
	text := `"` + words16 + `"`
	const out = 5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		stream := strings.Contains(string(raw), `"stream":true`)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages") && stream:
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
			fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n", text)
			fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			fmt.Fprintf(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", out)
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case strings.HasSuffix(r.URL.Path, "/messages"):
			fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":%d}}`, text, out)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":%s,"annotations":[]}]}],"usage":{"input_tokens":10,"output_tokens":%d,"total_tokens":%d}}`, text, out, 10+out)
		case stream:
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%s},\"finish_reason\":null}]}\n\n", text)
			fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", out, 10+out)
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}`, text, out, 10+out)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}]}`},
		{"chat stream", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"write"}`},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"write"}]}`},
		{"messages stream", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"write"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, srv.URL, "user-tpd", 20000)
			} else {
				h = fresh16(t, srv.URL)
			}
			resp, b := h.do(tc.path, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			charged := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
			if !waitFor(30*time.Second, func() bool { return charged() > 0 }) {
				t.Fatal("not settled")
			}
			if got := charged(); got < 3000 {
				t.Errorf("charged %v output tokens for an answer of 3,000 words whose usage reports %d", got, out)
			}
		})
	}
}

// A chat body's top-level member the chat API does not define weighed
// nothing, but LiteLLM passes such a member to the provider as one of its
// own parameters ("any non-openai param", its provider-specific params
// page), where an Anthropic "system" or a Cohere "chat_history" is
// billed: 3,000 words there went seven times through a 20,000-token
// bucket. It is now weighed by its key and value text.
func TestAdv12UnknownTopLevelChatMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["system"], body["chat_history"], body["system_instruction"]), 1
	})
	W := `"` + words16 + `"`
	for _, tc := range []struct {
		name, rest string
		after      bool // after messages, in the tail a resumed body remembers
	}{
		{"system", `"system":` + W, false},
		{"chat_history", `"chat_history":[{"role":"USER","message":` + W + `}]`, false},
		{"system_instruction", `"system_instruction":{"parts":[{"text":` + W + `}]}`, false},
		{"system after messages", `"system":` + W, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			body := `{"model":"gpt-4o-mini","max_tokens":1,` + tc.rest + `,"messages":[{"role":"user","content":"hi"}]}`
			if tc.after {
				body = `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],` + tc.rest + `}`
			}
			if passed := up.callThrough(t, h, "/v1/chat/completions", body, 10, 20000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// Responses instructions and input in shapes the API refuses (the
// leftovers named after round 11), and members of other shapes, held:
// each is weighed by its text or JSON text, so the bucket's 20,000 tokens
// are never billed past. Kept for coverage of those shapes.
func TestAdv12OddResponsesShapesHeld(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["input"], body["instructions"]), 1
	})
	W := `"` + words16 + `"`
	for _, tc := range []struct{ name, rest string }{
		{"instructions list of a string", `"instructions":[` + W + `],"input":"hi"`},
		{"instructions object text", `"instructions":{"text":` + W + `},"input":"hi"`},
		{"instructions content object", `"instructions":{"role":"developer","content":{"type":"input_text","text":` + W + `}},"input":"hi"`},
		{"input nested list", `"input":[[{"role":"user","content":` + W + `}]]`},
		{"input content object", `"input":[{"role":"user","content":{"type":"input_text","text":` + W + `}}]`},
		{"input content string element", `"input":[{"role":"user","content":[` + W + `]}]`},
		{"input content nested list", `"input":[{"role":"user","content":[[{"type":"input_text","text":` + W + `}]]}]`},
		{"input item type", `"input":[{"type":` + W + `,"role":"user","content":"hi"}]`},
		{"input item role", `"input":[{"role":` + W + `,"content":"hi"}]`},
		{"function output list", `"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":` + W + `}]}]`},
		{"function arguments object", `"input":[{"type":"function_call","call_id":"c","name":"f","arguments":{"x":` + W + `}},{"type":"function_call_output","call_id":"c","output":"ok"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			body := `{"model":"gpt-4o-mini","max_output_tokens":16,` + tc.rest + `}`
			if passed := up.callThrough(t, h, "/v1/responses", body, 10, 20000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
