package app

// Adversarial tests of the twelfth red-team round (2026-12-05): each
// drives llmguard through real loopback sockets to an upstream that bills
// every word of the members it reads (a lenient OpenAI- or
// Anthropic-compatible server whose prompt template writes a message,
// item or prediction out as its JSON), and fails where the upstream
// billed more than the bucket held.

import (
	"testing"
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
