package weigher

import (
	"strings"
	"testing"
)

// flatTools is cookbookTools in the Responses API's flattened function-tool
// shape ({"type":"function","name",…} instead of {"function":{…}}).
var flatTools = strings.Replace(strings.Replace(cookbookTools, `"function": {`, "", 1), `}}}]`, `}}]`, 1)

func TestResponsesMatchesChatMethod(t *testing.T) {
	// OpenAI publishes no Responses counting rule; the method is the chat
	// framing, so the cookbook's conversations must weigh as in Chat (the
	// cookbook's published prompt_tokens: 124 and 101 for gpt-4o).
	w := testWeigher(t)
	for _, tc := range []struct {
		name, body string
		want       int64
	}{
		{"messages", `{"model":"gpt-4o","input":` + cookbookMessages + `}`, 124},
		{"tools", `{"model":"gpt-4o","input":` + cookbookToolMessages + `,"tools":` + flatTools + `}`, 101},
	} {
		e := w.Responses([]byte(tc.body))
		if !e.Parsed || e.InputTokens != tc.want {
			t.Errorf("%s: Responses = %+v, want InputTokens %d", tc.name, e, tc.want)
		}
	}
}

func TestResponsesBodyShapes(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoder("gpt-4o")
	est := func(fields string) Estimate {
		t.Helper()
		return w.Responses([]byte(`{"model":"gpt-4o",` + fields + `}`))
	}
	str := est(`"input":"Tell me a joke"`).InputTokens
	if want := tokensPerMessage + countText(enc, "user") + countText(enc, "Tell me a joke") + tokensReply; str != want {
		t.Errorf("string input: %d, want %d", str, want)
	}
	same := []struct{ name, a, b string }{
		{"string vs message item", `"input":"Tell me a joke"`, `"input":[{"role":"user","content":"Tell me a joke"}]`},
		{"string content vs input_text", `"input":[{"role":"user","content":"Tell me a joke"}]`, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Tell me a joke"}]}]`},
		{"instructions vs developer message", `"instructions":"Be terse.","input":"hi"`, `"input":[{"role":"developer","content":"Be terse."},{"role":"user","content":"hi"}]`},
	}
	for _, tc := range same {
		if a, b := est(tc.a).InputTokens, est(tc.b).InputTokens; a != b {
			t.Errorf("%s: %d vs %d, want equal", tc.name, a, b)
		}
	}
	empty := est(`"input":[]`).InputTokens
	for _, tc := range []struct {
		name, item string
		want       int64
	}{
		{"function_call", `{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`,
			tokensPerToolCall + countText(enc, "get_weather") + countText(enc, `{"city":"Paris"}`)},
		{"function_call_output", `{"type":"function_call_output","call_id":"c1","output":"15 degrees"}`, tokensPerMessage + countText(enc, "15 degrees")},
		{"function_call_output parts", `{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"15 degrees"}]}`, tokensPerMessage + countText(enc, "15 degrees")},
		{"reasoning", `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Thinking about weather"}],"encrypted_content":"QUJDRA=="}`,
			countText(enc, "Thinking about weather") + 2},
		{"low image", `{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png","detail":"low"}]}`, tokensPerMessage + countText(enc, "user") + 85},
		{"image data URL", `{"role":"user","content":[{"type":"input_image","image_url":"` + pngDataURL(t, 1024, 1024) + `","detail":"high"}]}`, tokensPerMessage + countText(enc, "user") + 765},
		{"image file id", `{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}`, tokensPerMessage + countText(enc, "user") + 85 + 8*170},
		{"PDF file_data", `{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + fakePDF(3) + `"}]}`,
			tokensPerMessage + countText(enc, "user") + countText(enc, "a.pdf") + 3*(pageTextTokens+85+8*170)},
		{"file id", `{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}`, tokensPerMessage + countText(enc, "user")}, // hidden: the window is reserved
		{"assistant output_text", `{"role":"assistant","content":[{"type":"output_text","text":"Sure."}]}`, tokensPerMessage + countText(enc, "assistant") + countText(enc, "Sure.")},
		{"hosted tool call", `{"type":"web_search_call","id":"ws_1","status":"completed"}`, ceilDiv(int64(len(`{"type":"web_search_call","id":"ws_1","status":"completed"}`)), unknownPartBytesPerToken)},
	} {
		if got := est(`"input":[`+tc.item+`]`).InputTokens - empty; got != tc.want {
			t.Errorf("%s: adds %d, want %d", tc.name, got, tc.want)
		}
	}
	withFormat := est(`"input":[],"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}}`).InputTokens
	if want := empty + countText(enc, `{"type":"json_schema","name":"x","schema":{"type":"object"}}`); withFormat != want {
		t.Errorf("json_schema format: %d, want %d", withFormat, want)
	}
}

func TestResponsesServerContextAndOutput(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, fields  string
		server        bool
		out           int64
		stream, usage bool
	}{
		{"plain", `"input":"hi","max_output_tokens":300`, false, 300, false, false},
		{"previous_response_id", `"input":"hi","previous_response_id":"resp_1"`, true, 4096, false, false},
		{"empty previous_response_id", `"input":"hi","previous_response_id":""`, false, 4096, false, false},
		{"null previous_response_id", `"input":"hi","previous_response_id":null`, false, 4096, false, false},
		{"conversation id", `"input":"hi","conversation":"conv_1"`, true, 4096, false, false},
		{"conversation object", `"input":"hi","conversation":{"id":"conv_1"}`, true, 4096, false, false},
		{"stored prompt", `"prompt":{"id":"pmpt_1","variables":{"x":"y"}}`, true, 4096, false, false},
		{"item_reference", `"input":[{"type":"item_reference","id":"msg_1"}]`, true, 4096, false, false},
		{"stream, max_output_tokens 0 read as unset", `"input":"hi","stream":true,"max_output_tokens":0`, false, 4096, true, true},
		{"bad max_output_tokens", `"input":"hi","max_output_tokens":-3`, false, 4096, false, false},
	} {
		e := w.Responses([]byte(`{"model":"gpt-4o",` + tc.fields + `}`))
		if e.ServerContext != tc.server || e.OutputTokens != tc.out || e.Stream != tc.stream || e.IncludeUsage != tc.usage {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
	if e := w.Responses([]byte(`[`)); e.Parsed || e.InputTokens != 1 || e.OutputTokens != 1000 {
		t.Errorf("garbage: %+v", e)
	}
}
