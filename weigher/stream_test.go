package weigher

import (
	"strings"
	"testing"
)

// sseEvent is one event of a recorded stream: its SSE event name and data.
type sseEvent struct{ typ, data string }

// feed runs events through a Stream of kind k and returns it with the
// concatenated text and updates.
func feed(k Kind, events []sseEvent) (Stream, string, []StreamUpdate) {
	s := NewStream(k)
	var text strings.Builder
	var ups []StreamUpdate
	for _, e := range events {
		u := s.Event([]byte(e.typ), []byte(e.data))
		text.WriteString(u.Text)
		ups = append(ups, u)
	}
	return s, text.String(), ups
}

func TestStreamMessages(t *testing.T) {
	// The event flow of https://platform.claude.com/docs/en/build-with-claude/streaming.
	events := []sseEvent{
		{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}`},
		{"ping", `{"type":"ping"}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think. "}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"!"}}`},
		{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Paris\"}"}}`},
		// Cumulative output counts: the last (largest) wins, never the sum.
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":5}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":12}}`},
		// Newer API versions repeat the (cumulative) input figures.
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":20}}`},
	}
	s, text, ups := feed(KindMessages, events)
	// The tool's name is output the model wrote, counted at its block's
	// start as a JSON answer's tool_use block's is (adv41).
	if want := `Let me think. Hello!get_weather{"location": "Paris"}`; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	want := Usage{InputTokens: 2125, CachedInputTokens: 2000, CacheWriteTokens: 100, OutputTokens: 20}
	if r := s.Usage(); r.Usage != want || !r.Input || !r.Output || r.Final {
		t.Errorf("before message_stop: %+v, want %+v, not final", r, want)
	}
	if !ups[0].HasUsage || ups[1].HasUsage || !ups[11].HasUsage {
		t.Errorf("HasUsage flags: %+v", ups)
	}
	if u := s.Event([]byte("message_stop"), []byte(`{"type":"message_stop"}`)); !u.Done {
		t.Errorf("message_stop: %+v", u)
	}
	if r := s.Usage(); !r.Final || r.Usage != want {
		t.Errorf("after message_stop: %+v", r)
	}
	if u, src := s.Settle(Estimate{InputTokens: 9999}, 3); u != want || src != SourceReported {
		t.Errorf("Settle = %+v, %v", u, src)
	}
}

func TestStreamMessagesGatewayInputInDelta(t *testing.T) {
	// Some gateways send input_tokens 0 at message_start and the real count
	// in message_delta; a later 0 never erases a figure.
	s, _, _ := feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":0,"output_tokens":0}}}`},
		{"message_delta", `{"type":"message_delta","usage":{"input_tokens":9,"output_tokens":7}}`},
		{"message_delta", `{"type":"message_delta","usage":{"input_tokens":0,"output_tokens":7}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if r := s.Usage(); r.Usage != (Usage{InputTokens: 9, OutputTokens: 7}) || !r.Final {
		t.Errorf("Usage = %+v", r)
	}
}

func TestStreamMessagesInBandError(t *testing.T) {
	s, text, ups := feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":40,"output_tokens":1}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial answer"}}`},
		{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	})
	if !ups[2].Err || ups[2].HasUsage || !s.Err() || s.Done() {
		t.Errorf("error event: %+v", ups[2])
	}
	// Input as reported at message_start; output the larger of the
	// placeholder and the locally counted text, the error's message
	// counted with it once the answer began (adv43: high, never low).
	u, src := s.Settle(Estimate{InputTokens: 50}, 2)
	if u != (Usage{InputTokens: 40, OutputTokens: 2}) || src != SourcePartial || text != "Partial answerOverloaded" {
		t.Errorf("Settle = %+v, %v (text %q)", u, src, text)
	}
	// An error before anything: refund.
	s, _, _ = feed(KindMessages, []sseEvent{{"error", `{"type":"error","error":{"type":"api_error","message":"x"}}`}})
	if u, src := s.Settle(Estimate{InputTokens: 50, OutputTokens: 100}, 0); u != (Usage{}) || src != SourceRefund {
		t.Errorf("error only: Settle = %+v, %v", u, src)
	}
}

func TestStreamResponses(t *testing.T) {
	events := []sseEvent{
		{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","usage":null}}`},
		{"response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","summary":[]}}`},
		{"response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","delta":"Planning. "}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hi"}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","delta":" there"}`},
		{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"a\":1}"}`},
		{"response.audio.delta", `{"type":"response.audio.delta","delta":"UklGRg=="}`},
		{"response.output_text.done", `{"type":"response.output_text.done","text":"Hi there"}`},
	}
	s, text, _ := feed(KindResponses, events)
	if want := `Planning. Hi there{"a":1}`; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	if r := s.Usage(); r.Input || r.Output || r.Final {
		t.Errorf("usage before completion: %+v", r)
	}
	// Without usage: the estimate's input plus the counted output.
	if u, src := s.Settle(Estimate{InputTokens: 30}, 8); u != (Usage{InputTokens: 30, OutputTokens: 8}) || src != SourceCounted {
		t.Errorf("Settle = %+v, %v", u, src)
	}
	want := Usage{InputTokens: 328, CachedInputTokens: 256, OutputTokens: 52, ReasoningTokens: 30}
	for _, end := range []string{"response.completed", "response.incomplete", "response.failed"} {
		s2 := s
		u := s2.Event([]byte(end), []byte(`{"type":"`+end+`","response":{"id":"resp_1","status":"x","usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":380}}}`))
		if !u.Done || !u.HasUsage || u.Err != (end == "response.failed") {
			t.Errorf("%s: %+v", end, u)
		}
		if got, src := s2.Settle(Estimate{InputTokens: 1}, 1); got != want || src != SourceReported {
			t.Errorf("%s: Settle = %+v, %v", end, got, src)
		}
	}
	// The SSE event name alone is enough when data lacks "type".
	s3 := NewStream(KindResponses)
	if u := s3.Event([]byte("response.output_text.delta"), []byte(`{"delta":"x"}`)); u.Text != "x" {
		t.Errorf("event name only: %+v", u)
	}
	if u := s3.Event([]byte("error"), []byte(`{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}`)); !u.Err || u.HasUsage {
		t.Errorf("error event: %+v", u)
	}
}

func TestStreamChatAndCompletions(t *testing.T) {
	s, text, ups := feed(KindCompletions, []sseEvent{
		{"", `{"id":"cmpl-1","object":"text_completion","choices":[{"text":"Hello","index":0,"finish_reason":null}],"usage":null}`},
		{"", `{"id":"cmpl-1","object":"text_completion","choices":[{"text":" world","index":0,"finish_reason":"stop"}]}`},
		{"", `{"id":"cmpl-1","object":"text_completion","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`},
		{"", `[DONE]`},
	})
	if text != "Hello world" || !ups[2].UsageOnly || !ups[2].HasUsage || !ups[3].Done {
		t.Errorf("completions: text %q updates %+v", text, ups)
	}
	if u, src := s.Settle(Estimate{}, 0); u != (Usage{InputTokens: 5, OutputTokens: 2}) || src != SourceReported {
		t.Errorf("completions Settle = %+v, %v", u, src)
	}
	s, text, ups = feed(KindChat, []sseEvent{
		{"", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`},
		{"", `{"error":{"message":"The server had an error","type":"server_error"}}`},
	})
	if text != "Hi" || !ups[1].Err || !s.Err() {
		t.Errorf("chat: %q %+v", text, ups)
	}
	if u, src := s.Settle(Estimate{InputTokens: 10}, 1); u != (Usage{InputTokens: 10, OutputTokens: 1}) || src != SourceCounted {
		t.Errorf("chat Settle = %+v, %v", u, src)
	}
	// Kinds without streams read nothing.
	for _, k := range []Kind{KindEmbeddings, KindCountTokens, KindOther} {
		st := NewStream(k)
		if u := st.Event(nil, []byte(`{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}`)); u != (StreamUpdate{}) {
			t.Errorf("%v: %+v", k, u)
		}
	}
}

func TestStreamTextDoesNotAliasData(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		data string
	}{
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hello"}}`},
		{KindResponses, `{"type":"response.output_text.delta","delta":"Hello"}`},
	} {
		s := NewStream(tc.k)
		data := []byte(tc.data)
		u := s.Event(nil, data)
		for i := range data {
			data[i] = 'x'
		}
		if u.Text != "Hello" {
			t.Errorf("%v: Text changed with data: %q", tc.k, u.Text)
		}
	}
}

// TestStreamOutputAfterFinalUsage: text after the usage that should be a
// stream's last figure makes the usage not final (settled at the larger of
// it and the text counted), in every kind; a second, smaller chat usage
// does not undo the first; output that is not text is flagged Uncounted.
func TestStreamOutputAfterFinalUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   Kind
		events [][2]string // event type, data
		final  bool
		output int64 // settled with 500 tokens counted
	}{
		{"chat: usage last", KindChat, [][2]string{
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}`}}, true, 7},
		{"chat: text after usage", KindChat, [][2]string{
			{"", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}`},
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}`}}, false, 500},
		{"chat: smaller second usage", KindChat, [][2]string{
			{"", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":700}}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}`}}, true, 700},
		{"responses: text after completed", KindResponses, [][2]string{
			{"", `{"type":"response.completed","response":{"usage":{"input_tokens":3,"output_tokens":7}}}`},
			{"", `{"type":"response.output_text.delta","delta":"a"}`}}, false, 500},
		{"messages: delta, stop", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}`},
			{"", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`},
			{"", `{"type":"message_delta","usage":{"output_tokens":7}}`},
			{"", `{"type":"message_stop"}`}}, true, 7},
		// The input must be reported too, as a Messages answer's usage
		// must report both: otherwise the estimate's input stands.
		{"messages: no input figure", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"output_tokens":1}}}`},
			{"", `{"type":"message_delta","usage":{"output_tokens":7}}`},
			{"", `{"type":"message_stop"}`}}, false, 500},
		{"messages: input as a string", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"input_tokens":"3","output_tokens":1}}}`},
			{"", `{"type":"message_delta","usage":{"output_tokens":7}}`},
			{"", `{"type":"message_stop"}`}}, false, 500},
		{"messages: input in message_delta only", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"output_tokens":1}}}`},
			{"", `{"type":"message_delta","usage":{"input_tokens":3,"output_tokens":7}}`},
			{"", `{"type":"message_stop"}`}}, true, 7},
		{"messages: no message_delta", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}`},
			{"", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`},
			{"", `{"type":"message_stop"}`}}, false, 500},
		{"messages: text after message_delta", KindMessages, [][2]string{
			{"", `{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}`},
			{"", `{"type":"message_delta","usage":{"output_tokens":7}}`},
			{"", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`},
			{"", `{"type":"message_stop"}`}}, false, 500},
	} {
		s := NewStream(tc.kind)
		for _, e := range tc.events {
			s.Event([]byte(e[0]), []byte(e[1]))
		}
		if got := s.Usage().Final; got != tc.final {
			t.Errorf("%s: final %v, want %v", tc.name, got, tc.final)
		}
		if u, _ := s.Settle(Estimate{InputTokens: 3, OutputTokens: 50}, 500); u.OutputTokens != tc.output {
			t.Errorf("%s: output %d, want %d", tc.name, u.OutputTokens, tc.output)
		}
	}
	for _, tc := range []struct {
		kind Kind
		data string
		want bool
	}{
		{KindChat, `{"choices":[{"delta":{"audio":{"data":"QUFB"}}}]}`, true},
		{KindChat, `{"choices":[{"delta":{"role":"assistant","content":"x","audio":null,"extra":""}}]}`, false},
		{KindResponses, `{"type":"response.audio.delta","delta":"QUFB"}`, true},
		{KindResponses, `{"type":"response.image_generation_call.partial_image","partial_image_b64":"QUFB"}`, true},
		{KindMessages, `{"type":"content_block_start","content_block":{"type":"redacted_thinking","data":"x"}}`, true},
		{KindMessages, `{"type":"content_block_start","content_block":{"type":"text","text":""}}`, false},
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"future_delta","data":"x"}}`, true},
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"future_delta","data":""}}`, false},
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"citations_delta","citation":{"cited_text":"x"}}}`, false},
		// A thinking block's signature carries thinking billed beyond the
		// text streamed (a summary, or none when its display is "omitted").
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"signature_delta","signature":"abc"}}`, true},
		{KindMessages, `{"type":"content_block_delta","delta":{"type":"signature_delta","signature":""}}`, false},
	} {
		s := NewStream(tc.kind)
		if got := s.Event(nil, []byte(tc.data)).Uncounted; got != tc.want {
			t.Errorf("%s %s: Uncounted %v, want %v", tc.kind, tc.data, got, tc.want)
		}
	}
}

// TestResponsesDoneTextCountedOnce: a Responses *.done event's text counts
// only when it outruns the deltas streamed before it (an upstream sending
// the text there alone), never twice.
func TestResponsesDoneTextCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		want   string // the text counted, joined
	}{
		{"deltas then done", []string{
			`{"type":"response.output_text.delta","delta":"ab"}`, `{"type":"response.output_text.delta","delta":"c"}`,
			`{"type":"response.output_text.done","text":"abc"}`}, "abc"},
		{"done alone", []string{`{"type":"response.output_text.done","text":"abc"}`}, "abc"},
		{"arguments done alone", []string{`{"type":"response.function_call_arguments.done","arguments":"{}"}`}, "{}"},
		{"two items, the second without deltas", []string{
			`{"type":"response.output_text.delta","delta":"ab"}`, `{"type":"response.output_text.done","text":"ab"}`,
			`{"type":"response.refusal.done","refusal":"no"}`}, "abno"},
	} {
		s := NewStream(KindResponses)
		var got string
		for _, e := range tc.events {
			got += s.Event(nil, []byte(e)).Text
		}
		if got != tc.want {
			t.Errorf("%s: counted %q, want %q", tc.name, got, tc.want)
		}
	}
}
