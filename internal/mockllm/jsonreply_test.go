package mockllm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/weigher"
)

// A request that asks for JSON output (chat response_format, Responses
// text.format, Messages output_config.format) gets a reply that decodes as
// a JSON object, streamed or not, with the same usage as a text reply; one
// that does not ask gets the words. An SDK's parse() failed on the words
// with "Unexpected token" (trial20).
func TestJSONOutputIsAJSONReply(t *testing.T) {
	s := start(t)
	for _, c := range []struct {
		name, path, body, format, textPath string
		kind                               weigher.Kind
	}{
		{"chat json_schema", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":6,"messages":[{"role":"user","content":"hi"}]%s}`,
			`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`, "choices.0.message.content", weigher.KindChat},
		{"chat json_object", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":6,"messages":[{"role":"user","content":"hi"}]%s}`,
			`,"response_format":{"type":"json_object"}`, "choices.0.message.content", weigher.KindChat},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":6,"input":"hi"%s}`,
			`,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}}`, "output.0.content.0.text", weigher.KindResponses},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":6,"messages":[{"role":"user","content":"hi"}]%s}`,
			`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}`, "content.0.text", weigher.KindMessages},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, asked := range []bool{false, true} {
				extra := ""
				if asked {
					extra = c.format
				}
				body := strings.Replace(c.body, "%s", extra, 1)
				r := post(t, s, c.path, body, nil)
				if r.status != 200 {
					t.Fatalf("asked %v: status %d: %s", asked, r.status, r.body)
				}
				text := gjson.GetBytes(r.body, c.textPath).String()
				usage := gjson.GetBytes(r.body, "usage").Raw
				stream := strings.Replace(body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1)
				if c.kind != weigher.KindChat {
					stream = strings.Replace(body, "{", `{"stream":true,`, 1)
				}
				sr := post(t, s, c.path, stream, nil)
				su, _, streamed := settle(c.kind, events(sr.body))
				if got := isJSONObject(text) && isJSONObject(streamed); got != asked {
					t.Errorf("asked %v: a JSON object %v: %q, streamed %q", asked, got, text, streamed)
				}
				if su.Usage.OutputTokens != 6 || !strings.Contains(usage, "6") {
					t.Errorf("asked %v: usage %s, streamed output %d, want 6 output tokens", asked, usage, su.Usage.OutputTokens)
				}
			}
		})
	}
	// A forced tool call keeps its arguments, {"input":"<words>"}.
	r := post(t, s, "/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":6,"messages":[{"role":"user","content":"hi"}],`+
		`"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, nil)
	if args := gjson.GetBytes(r.body, "choices.0.message.tool_calls.0.function.arguments").String(); !isJSONObject(args) || !gjson.Get(args, "input").Exists() {
		t.Errorf("tool call arguments %q, want {\"input\":…}: %s", args, r.body)
	}
}

// isJSONObject reports whether s decodes as one JSON object.
func isJSONObject(s string) bool {
	var v map[string]any
	return json.Unmarshal([]byte(s), &v) == nil
}
