package app

// Adversarial tests of the eleventh red-team round (2026-12-04): each
// drives llmguard through real loopback sockets to an upstream that bills
// every string of the body it reads (a lenient OpenAI- or
// Anthropic-compatible server whose prompt template writes out members
// it does not know), and fails where the upstream billed more than the
// bucket held.

import (
	"fmt"
	"testing"
)

// unknown11 is a member no API defines, holding 3,000 words: a lenient
// upstream that writes a message, part or tool out as its JSON bills
// them.
var unknown11 = `"note":"` + words16 + `"`

// Members llmguard did not know inside the messages, parts, calls and
// tools it weighs (a text part's "note" beside its "text") weighed
// nothing: 3,000 words there went seven times through a 20,000-token
// bucket, billed 21,0xx by an upstream that writes them into the prompt.
// Each is now weighed by its text, as input.
func TestAdv11UnknownMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["input"], body["system"], body["tools"], body["tool_choice"]), 1
	})
	u := unknown11
	call := `{"role":"assistant","tool_calls":[%s]},{"role":"tool","tool_call_id":"c","content":"ok"}`
	chat := func(msgs string) string {
		return `{"model":"gpt-4o-mini","max_tokens":1,"messages":[` + msgs + `]}`
	}
	// gpt-4o weighs a low-detail image 85 tokens (gpt-4o-mini: 2,833,
	// which would hide the 3,000 words from the bucket's count).
	chat4o := func(msgs string) string {
		return `{"model":"gpt-4o","max_tokens":1,"messages":[` + msgs + `]}`
	}
	responses := func(input string) string {
		return `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[` + input + `]}`
	}
	claude := func(rest string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":1,` + rest + `}`
	}
	claudeMsgs := func(msgs string) string { return claude(`"messages":[` + msgs + `]`) }
	tool := `{"name":"f","description":"d","input_schema":{"type":"object"}}`
	for _, tc := range []struct{ name, path, body string }{
		{"chat message", "/v1/chat/completions", chat(`{"role":"user","content":"hi",` + u + `}`)},
		{"chat text part", "/v1/chat/completions", chat(`{"role":"user","content":[{"type":"text","text":"hi",` + u + `}]}`)},
		{"chat image part", "/v1/chat/completions", chat4o(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"},` + u + `}]}`)},
		{"chat image_url", "/v1/chat/completions", chat4o(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low",` + u + `}}]}`)},
		{"chat tool call", "/v1/chat/completions", chat(`{"role":"user","content":"hi"},` + fmt.Sprintf(call, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},`+u+`}`))},
		{"chat call function", "/v1/chat/completions", chat(`{"role":"user","content":"hi"},` + fmt.Sprintf(call, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}",`+u+`}}`))},
		{"responses message", "/v1/responses", responses(`{"type":"message","role":"user","content":"hi",` + u + `}`)},
		{"responses part", "/v1/responses", responses(`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi",` + u + `}]}`)},
		{"responses call", "/v1/responses", responses(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}",` + u + `}`)},
		{"responses call output", "/v1/responses", responses(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok",` + u + `}`)},
		{"messages message", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi",` + u + `}`)},
		{"messages text block", "/v1/messages", claudeMsgs(`{"role":"user","content":[{"type":"text","text":"hi",` + u + `}]}`)},
		{"messages system block", "/v1/messages", claude(`"system":[{"type":"text","text":"be brief",` + u + `}],"messages":[{"role":"user","content":"hi"}]`)},
		{"messages tool_use", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{},` + u + `}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}`)},
		{"messages tool_result", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok",` + u + `}]}`)},
		{"messages tool", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},` + u + `}]`)},
		{"messages defined tool", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"bash_20250124","name":"bash",` + u + `}]`)},
		{"messages tool_choice", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"auto",` + u + `}`)},
		{"messages tool_choice flag", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"auto","disable_parallel_tool_use":"` + words16 + `"}`)},
		{"messages tool_choice type", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":{"t":"` + words16 + `"}}`)},
		{"messages tool_choice without tools", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"auto",` + u + `}`)},
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
