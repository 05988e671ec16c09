package app

import (
	"testing"
)

// Bodies whose text stands where the API takes another shape — a chat or
// Messages "messages" given as one object or a bare string (or a list of
// them), a content part, Responses input item or tool given as a list or
// a string, an assistant's tool_calls, a call or its function given as
// one object or a string, a completions
// prompt given as an object (or a list of them), a suffix given as a list
// — or a Responses message item without content (the instructions as
// some other object), a chat or Responses tool_choice object, a Messages
// tool_choice string or tools list of strings, a role, name, refusal,
// call name, tool name or block title given as an object — weighed as
// nothing: a lenient upstream that reads them as text bills
// them (3,000 words in each went seven times through a 20,000-token
// bucket, billed 21,0xx). They are weighed by their JSON text.
func TestOddShapesAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["prompt"], body["suffix"], body["input"], body["instructions"], body["tools"], body["response_format"], body["prediction"], body["tool_choice"], body["system"]), 1
	})
	for _, tc := range []struct{ name, path, body string }{
		{"chat messages object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":{"role":"user","content":"` + words16 + `"}}`},
		{"chat messages list of strings", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":["` + words16 + `"]}`},
		{"chat messages list of lists", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[["` + words16 + `"]]}`},
		{"chat content list of lists", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":[["` + words16 + `"]]}]}`},
		{"messages content list of lists", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[["` + words16 + `"]]}]}`},
		{"input list of lists", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[["` + words16 + `"]]}`},
		{"input content list of lists", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"role":"user","content":[["` + words16 + `"]]}]}`},
		{"chat tools list of strings", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":["` + words16 + `"]}`},
		{"responses tools list of strings", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi","tools":["` + words16 + `"]}`},
		{"chat tool_calls object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","tool_calls":{"id":"c","type":"function","function":{"name":"f","arguments":"` + words16 + `"}}}]}`},
		{"chat tool call string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","tool_calls":["` + words16 + `"]}]}`},
		{"chat tool call function string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","tool_calls":[{"id":"c","type":"function","function":"` + words16 + `"}]}]}`},
		{"chat function_call string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","function_call":"` + words16 + `"}]}`},
		{"prompt token array of strings", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":[["` + words16 + `"]]}`},
		{"chat messages string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":"` + words16 + `"}`},
		{"messages object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":{"role":"user","content":"` + words16 + `"}}`},
		{"messages list of strings", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":["` + words16 + `"]}`},
		{"messages string", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":"` + words16 + `"}`},
		{"prompt object", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":{"text":"` + words16 + `"}}`},
		{"prompt objects", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":[{"text":"` + words16 + `"}]}`},
		{"suffix list", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","suffix":["` + words16 + `"]}`},
		{"instructions object", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi","instructions":{"text":"` + words16 + `"}}`},
		{"chat tools object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":{"type":"function","function":{"name":"f","description":"` + words16 + `"}}}`},
		{"chat response_format string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"response_format":"` + words16 + `"}`},
		{"responses tools object", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi","tools":{"type":"function","name":"f","description":"` + words16 + `"}}`},
		{"messages tools object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":{"name":"f","description":"` + words16 + `","input_schema":{"type":"object"}}}`},
		{"chat prediction string", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"prediction":"` + words16 + `"}`},
		{"chat tool_choice object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f","description":"` + words16 + `"}}}`},
		{"chat message name object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi","name":{"n":"` + words16 + `"}}]}`},
		{"chat message role object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":{"r":"` + words16 + `"},"content":"hi"}]}`},
		{"messages tools list of strings", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":["` + words16 + `"]}`},
		{"chat refusal object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","refusal":{"r":"` + words16 + `"}}]}`},
		{"chat tool call name object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","content":"hi","tool_calls":[{"id":"c","type":"function","function":{"name":{"n":"` + words16 + `"},"arguments":"{}"}}]}]}`},
		{"responses tool_choice object", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"` + words16 + `"}}`},
		{"responses role object", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"role":{"r":"` + words16 + `"},"content":"hi"}]}`},
		{"messages role object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":{"r":"` + words16 + `"},"content":"hi"}]}`},
		{"messages tool_choice string", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":"` + words16 + `"}`},
		{"messages tool name object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":{"n":"` + words16 + `"},"input_schema":{"type":"object"}}]}`},
		{"messages tool_use name object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":{"n":"` + words16 + `"},"input":{}}]}]}`},
		{"messages document title object", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"system":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"s"},"title":{"t":"` + words16 + `"}}],"messages":[{"role":"user","content":"hi"}]}`},
		{"input item without content", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"role":"user","text":"` + words16 + `"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startConfig(t, nil, twoFlavorConfig(up.url, "user-tpd", 20000))
			if passed := up.callThrough(t, h, tc.path, tc.body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
