package weigher

import (
	"strings"
	"testing"
)

// A Messages tool_choice type the API does not define ("ANY", an
// object) takes the larger of the model's two tool-use prompts, as a
// lenient upstream may read it as either: Claude 3 Haiku's forced prompt
// (340) is larger than its auto one (264), which it was weighed at.
func TestUnknownToolChoiceTypeTakesTheLargerPrompt(t *testing.T) {
	for _, tc := range []struct {
		choice string
		want   int64
	}{
		{"", 264}, {"auto", 264}, {"none", 264}, {"any", 340}, {"tool", 340},
		{"ANY", 340}, {" any", 340}, {`{"t":1}`, 340},
	} {
		if got := claudeToolPrompt("claude-3-haiku-20240307", tc.choice); got != tc.want {
			t.Errorf("choice %q: %d, want %d", tc.choice, got, tc.want)
		}
	}
	w := testWeigher(t)
	body := func(choice string) []byte {
		return []byte(`{"model":"claude-3-haiku-20240307","max_tokens":1,"messages":[{"role":"user","content":"hi"}],` +
			`"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"` + choice + `"}}`)
	}
	auto, odd := w.Messages(body("auto")), w.Messages(body("ANY"))
	if odd.InputTokens < auto.InputTokens+340-264 {
		t.Errorf(`tool_choice "ANY" weighs %d, "auto" %d: want the forced prompt's 76 more`, odd.InputTokens, auto.InputTokens)
	}
}

// Members a known object does not define are weighed by their text in
// every flavor, and a body the official API takes (only members it
// defines, ids and cache_control among them) weighs what it did.
func TestUnknownMembersWeighed(t *testing.T) {
	w := testWeigher(t)
	note := strings.Repeat("word ", 500)
	for _, tc := range []struct {
		name       string
		kind       Kind
		plain, odd string
	}{
		{"chat message", KindChat,
			`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"c","content":"hi"}]}`,
			`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"c","content":"hi","note":"` + note + `"}]}`},
		{"chat part", KindChat,
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"},"note":"` + note + `"}]}]}`},
		{"responses item", KindResponses,
			`{"model":"gpt-4o","input":[{"type":"function_call_output","id":"x","call_id":"c","output":"ok","status":"completed"}]}`,
			`{"model":"gpt-4o","input":[{"type":"function_call_output","id":"x","call_id":"c","output":"ok","status":"completed","note":"` + note + `"}]}`},
		{"messages block", KindMessages,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"},"note":"` + note + `"}]}]}`},
		{"messages block of a type ending in _tool_result", KindMessages,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"_tool_result","tool_use_id":"t","content":"hi"}]}]}`,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"_tool_result","tool_use_id":"t","content":"hi","note":"` + note + `"}]}]}`},
		{"messages tool_choice", KindMessages,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
			`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true,"note":"` + note + `"}}`},
	} {
		plain, odd := w.Weigh(tc.kind, []byte(tc.plain)), w.Weigh(tc.kind, []byte(tc.odd))
		if !plain.Parsed || !odd.Parsed {
			t.Fatalf("%s: refused: %v %v", tc.name, plain.Fault, odd.Fault)
		}
		if odd.InputTokens < plain.InputTokens+500 {
			t.Errorf("%s: %d with 500 words more than %d: the unknown member is not weighed", tc.name, odd.InputTokens, plain.InputTokens)
		}
	}
	// Known members weigh nothing of their own: the cookbook's count of a
	// tool message is its framing, role and content (3 + 1 + 1 + 3).
	if e := w.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"call_abc","content":"hi","annotations":[],"cache_control":{"type":"ephemeral"}}]}`)); e.InputTokens != 8 {
		t.Errorf("a tool message with known members weighs %d, want 8", e.InputTokens)
	}
}
