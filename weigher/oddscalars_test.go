package weigher

import (
	"strings"
	"testing"
)

// TestOddValuesWeighedByJSONText: a member read as text given as another
// value — a number of any length as a chat content or a Messages system,
// an object as a role, a name, a refusal, a call's name, a tool's name
// or a block's title — is weighed by its JSON text, as a lenient
// upstream that writes it out bills it (each weighed 0 or a few tokens
// before: a 9,000-digit number is some 1,500 tokens of text).
func TestOddValuesWeighedByJSONText(t *testing.T) {
	w := testWeigher(t)
	digits := "1" + strings.Repeat("2", 8999)
	words := `{"x":"` + strings.Repeat("word ", 3000) + `"}`
	const least = 1000
	for _, tc := range []struct {
		name string
		kind Kind
		body string
	}{
		{"chat content number", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":` + digits + `}]}`},
		{"chat role object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":` + words + `,"content":"hi"}]}`},
		{"chat name number", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","name":` + digits + `,"content":"hi"}]}`},
		{"chat call name object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","tool_calls":[{"function":{"name":` + words + `,"arguments":"{}"}}]}]}`},
		{"chat function_call name object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","function_call":{"name":` + words + `}}]}`},
		{"chat tool_choice object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + words + `}`},
		{"chat tool_choice string", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":"` + strings.Repeat("word ", 3000) + `"}`},
		{"responses tool_choice object", KindResponses, `{"model":"gpt-4o-mini","input":"hi","tool_choice":` + words + `}`},
		{"responses name number", KindResponses, `{"model":"gpt-4o-mini","input":[{"role":"user","name":` + digits + `,"content":"hi"}]}`},
		{"messages system number", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"system":` + digits + `,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages content number", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":` + digits + `}]}`},
		{"messages tool description object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":` + words + `,"input_schema":{}}]}`},
		{"messages tool_choice name object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":` + words + `}}`},
		{"messages thinking object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":` + words + `,"signature":"s"}]}]}`},
		{"messages redacted_thinking object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":` + words + `}]}]}`},
		{"messages search_result source object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result","source":` + words + `,"title":"t","content":[]}]}]}`},
	} {
		e := w.Weigh(tc.kind, []byte(tc.body))
		if e.Fault != FaultNone || e.InputTokens < least {
			t.Errorf("%s: %d input tokens (fault %v), want %d or more", tc.name, e.InputTokens, e.Fault, least)
		}
	}
}
