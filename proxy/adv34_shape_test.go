package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// TestMessagesStreamOutputInShapesNotReadIsUncounted: through real
// sockets, a Messages stream that ends with message_stop but no
// message_delta usage, whose output rides where the Messages reader counts
// no text — an OpenAI chat chunk (a lenient gateway answering in the other
// dialect), a tool_use block whose input arrives whole in its
// content_block_start instead of as input_json_delta, the answer in
// message_start's content (which is [] there) — is charged at least
// its output reservation, never the 0 or 1 token (message_start's
// placeholder) nothing counted adds up to. The same stream with its text in
// text_delta events is charged its input and that text, and a real
// tool_use start (input {}) marks nothing (its name is counted as text).
func TestMessagesStreamOutputInShapesNotReadIsUncounted(t *testing.T) {
	w := testWeigher(t)
	const body = `{"model":"gpt-4o-mini","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`
	est := w.Weigh(weigher.KindMessages, []byte(body))
	big := strings.Repeat("word ", 3000)
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	toolStart := func(input string) string {
		return "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":" + input + "}}\n\n"
	}
	textDelta := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + big + "\"}}\n\n"
	for _, tc := range []struct {
		name, stream string
		atLeast      int64
		exactly      bool
	}{
		{"an OpenAI chunk", start + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + big + "\"}}]}\n\n" + stop, 9 + est.OutputTokens, false},
		{"a tool_use input whole in its start", start + toolStart(`{"a":"`+big+`"}`) + stop, 9 + est.OutputTokens, false},
		{"a server_tool_use input whole in its start", start + strings.Replace(toolStart(`{"query":"`+big+`"}`), `"tool_use"`, `"server_tool_use"`, 1) + stop, 9 + est.OutputTokens, false},
		{"the answer in message_start's content", strings.Replace(start, `"message":{`, `"message":{"content":[{"type":"text","text":"`+big+`"}],`, 1) + stop, 9 + est.OutputTokens, false},
		{"text deltas (control)", start + textDelta + stop, 9 + w.CountText("gpt-4o-mini", big), true},
		// The tool's name "f" is output too (counted since adv41).
		{"an empty tool_use start and text deltas (control)", start + toolStart(`{}`) + textDelta + stop, 9 + w.CountText("gpt-4o-mini", "f") + w.CountText("gpt-4o-mini", big), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charged := chargedThrough(t, w, sseAnswer(tc.stream), spec.FlavorAnthropic, "/v1/messages", body)
			checkCharged(t, charged, tc.atLeast, tc.exactly)
		})
	}
}

// TestResponsesStreamOutputOnlyInItemsIsCounted: through real sockets, a
// Responses stream that ends with response.completed without a usage,
// whose text came only in events llmguard does not read as text
// (response.output_item.done, response.content_part.done: no deltas, no
// output_text.done), is charged the text its terminal event's
// response.output holds, counted, never output 0. A stream that streamed
// the same text as deltas is charged it once (the terminal event's
// output does not outrun them), and one with a usage is charged the usage.
func TestResponsesStreamOutputOnlyInItemsIsCounted(t *testing.T) {
	w := testWeigher(t)
	const body = `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":4000,"stream":true}`
	est := w.Weigh(weigher.KindResponses, []byte(body))
	big := strings.Repeat("word ", 3000)
	bigTokens := w.CountText("gpt-4o-mini", big)
	item := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + big + `"}]}`
	itemDone := "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item + "}\n\n"
	partDone := "event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"part\":{\"type\":\"output_text\",\"text\":\"" + big + "\"}}\n\n"
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + big + "\"}\n\n"
	completed := func(usage string) string {
		return "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[" + item + "]" + usage + "}}\n\n"
	}
	for _, tc := range []struct {
		name, stream string
		atLeast      int64
		exactly      bool
	}{
		{"text only in output_item.done and the terminal output", partDone + itemDone + completed(""), est.InputTokens + bigTokens, true},
		{"text as deltas too (control)", delta + partDone + itemDone + completed(""), est.InputTokens + bigTokens, true},
		{"a usage (control)", itemDone + completed(`,"usage":{"input_tokens":7,"output_tokens":5000}`), 7 + 5000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charged := chargedThrough(t, w, sseAnswer(tc.stream), spec.FlavorOpenAI, "/v1/responses", body)
			checkCharged(t, charged, tc.atLeast, tc.exactly)
		})
	}
}

// TestChatStreamOutputInAnotherDialectIsUncounted: through real sockets, a
// chat completions stream whose output comes as Anthropic events
// (content_block_delta, an upstream answering in the other dialect) or
// Responses events, then a finish chunk and [DONE], and no usage, is
// charged at least its output reservation: the chat reader counts text
// only in choices. Azure's first chunk (prompt_filter_results beside an
// empty choices) and ordinary chunks mark nothing: the control is charged
// its input and the text exactly.
func TestChatStreamOutputInAnotherDialectIsUncounted(t *testing.T) {
	w := testWeigher(t)
	const body = `{"model":"gpt-4o-mini","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`
	est := w.Weigh(weigher.KindChat, []byte(body))
	big := strings.Repeat("word ", 3000)
	finish := "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	azure := "data: {\"choices\":[],\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}}}]}\n\n"
	for _, tc := range []struct {
		name, stream string
		atLeast      int64
		exactly      bool
	}{
		{"Anthropic content_block_delta events", "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + big + "\"}}\n\n" + finish, est.InputTokens + est.OutputTokens, false},
		{"a Responses output_text.delta event", "data: {\"type\":\"response.output_text.delta\",\"delta\":\"" + big + "\"}\n\n" + finish, est.InputTokens + est.OutputTokens, false},
		{"Azure's filter chunk and content chunks (control)", azure + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + big + "\"}}]}\n\n" + finish, est.InputTokens + w.CountText("gpt-4o-mini", big), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charged := chargedThrough(t, w, sseAnswer(tc.stream), spec.FlavorOpenAI, "/v1/chat/completions", body)
			checkCharged(t, charged, tc.atLeast, tc.exactly)
		})
	}
}
