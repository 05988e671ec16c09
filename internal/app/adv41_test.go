package app

// Adversarial tests of adv41 (2026-12-07): Messages stream events that
// carry text where no reader counted it — an event of a type the API does
// not send, and the ping, content_block_stop and message_stop events the
// reader knew but read nothing of — beside a usage reporting 1 output
// token. Each drives llmguard through loopback sockets to an upstream
// whose stream the test sets (answerCost), and checks what the bucket was
// charged.

import (
	"fmt"
	"strings"
	"testing"
)

// A Messages stream whose text came in an event of a type the API does
// not send ({"type":"foo","text":…}, a nested string, or an event named
// only by its SSE "event:" line), beside a message_delta reporting 1
// output token, was charged 9 tokens: the event was only marked
// uncounted, which the usage settles. Its string text (every string but
// its "type") is now counted and checked against the usage as a
// text_delta's is: 2,008. A ping, content_block_stop or message_stop
// carrying text was read as empty (9 tokens); its strings are now counted
// too: 2,008. An honest stream, whose usage covers the text, is charged
// its usage, unknown event or not.
func TestAdv41UnknownMessagesEventTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n"
	const block = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	const stop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	event := func(name, data string) string { return fmt.Sprintf("event: %s\ndata: %s\n\n", name, data) }
	end := func(out int) string {
		return fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", out) +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"unknown event's text", start + block + event("foo", fmt.Sprintf(`{"type":"foo","index":0,"text":%q}`, words)) + stop + end(1), 8 + 2000},
		{"unknown event's nested string", start + block + event("foo", fmt.Sprintf(`{"type":"foo","payload":{"parts":[{"value":%q}]}}`, words)) + stop + end(1), 8 + 2000},
		{"event named by its SSE line", start + block + event("foo", fmt.Sprintf(`{"text":%q}`, words)) + stop + end(1), 8 + 2000},
		{"unknown event after the usage", start + block + stop + end(1) + event("foo", fmt.Sprintf(`{"type":"foo","text":%q}`, words)), 8 + 2000},
		{"ping's text", start + event("ping", fmt.Sprintf(`{"type":"ping","text":%q}`, words)) + block + stop + end(1), 8 + 2000},
		{"content_block_stop's text", start + block + event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":0,"delta":{"text":%q}}`, words)) + end(1), 8 + 2000},
		{"message_stop's text", start + block + stop + strings.TrimSuffix(end(1), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") +
			event("message_stop", fmt.Sprintf(`{"type":"message_stop","content":[{"type":"text","text":%q}]}`, words)), 8 + 2000},
		{"honest unknown event", start + block + event("foo", fmt.Sprintf(`{"type":"foo","text":%q}`, words)) + stop + end(2500), 8 + 2500},
		{"honest stream", start + event("ping", `{"type": "ping"}`) + block + event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, words)) + stop + end(2500), 8 + 2500},
		{"honest Bedrock stop", start + block + event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`) + stop + strings.TrimSuffix(end(3), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") +
			event("message_stop", `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":8,"outputTokenCount":3,"invocationLatency":500,"firstByteLatency":200}}`), 8 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d (8 input tokens and %d bytes of output)", got, tc.least, tc.least+10, len(words))
			}
		})
	}
}

// A Messages stream whose text_delta (or input_json_delta, thinking_delta)
// carried 2,000 words in a member the API does not send beside its text
// ({"type":"text_delta","text":"hi","extra":…}), or beside the delta at
// the event's top, was charged 9 tokens beside a usage of 1 output token:
// only the delta's text was read. The strings of such members are now
// counted with the text: 2,008. The compact deltas Anthropic sends are
// read as before (honest, with or without spaces).
func TestAdv41StrayDeltaStringsAreCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n"
	const block = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	const stop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	delta := func(d string) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":%s}\n\n", d)
	}
	end := func(out int) string {
		return fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", out) +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	quarter := words[:len(words)/4+1] // 500 words and a space: 501 tokens
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"member beside the text", start + block + delta(fmt.Sprintf(`{"type":"text_delta","text":"hi","extra":%q}`, words)) + stop + end(1), 8 + 2000},
		{"member beside the partial json", start + block + delta(fmt.Sprintf(`{"type":"input_json_delta","partial_json":"{","extra":{"x":[%q]}}`, words)) + stop + end(1), 8 + 2000},
		{"member beside the delta", start + block + strings.Replace(delta(`{"type":"text_delta","text":"hi"}`), `"index":0,`, fmt.Sprintf(`"index":0,"text":%q,`, words), 1) + stop + end(1), 8 + 2000},
		// The same stray member in every delta (which the skeleton of the
		// first would read on its fast path): each is counted.
		{"stray in every delta", start + block + strings.Repeat(delta(fmt.Sprintf(`{"type":"text_delta","text":"a","extra":%q}`, quarter)), 4) + stop + end(1), 8 + 2004},
		{"honest spaced deltas", start + block + strings.Repeat(delta(fmt.Sprintf(`{ "type": "text_delta", "text": %q }`, quarter)), 4) + stop + end(2500), 8 + 2500},
		{"honest", start + block + strings.Repeat(delta(fmt.Sprintf(`{"type":"text_delta","text":%q}`, quarter)), 4) + stop + end(2500), 8 + 2500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}

// A Messages stream whose tool_use block (or server_tool_use) started
// with a name of 2,000 words and an empty input, beside a usage of 1
// output token, was charged 9 tokens: a block's name was read only when
// its input came whole. The name, output the model wrote, is now counted:
// 2,008. An honest tool call, whose usage covers its name and input, is
// charged its usage.
func TestAdv41ToolNameIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n"
	block := func(b string) string {
		return fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":%s}\n\n", b)
	}
	const input = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}\n\n"
	const stop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	end := func(out int) string {
		return fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":%d}}\n\n", out) +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"tool_use name", start + block(fmt.Sprintf(`{"type":"tool_use","id":"t","name":%q,"input":{}}`, words)) + input + stop + end(1), 8 + 2000},
		{"server_tool_use name", start + block(fmt.Sprintf(`{"type":"server_tool_use","id":"s","name":%q,"input":{}}`, words)) + stop + end(1), 8 + 2000},
		{"honest tool call", start + block(`{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}`) + input + stop + end(40), 8 + 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}

// A Messages stream whose message_delta carried 2,000 words in a member
// the API does not send (in its delta beside stop_reason, or at its top
// beside the usage), reporting 1 output token, was charged 9 tokens:
// only its usage was read. The strings of such members are now counted
// against that usage: 2,008. The message_delta Anthropic sends, compact
// or with its documented members (stop_details, container,
// context_management), is read as before.
func TestAdv41StrayMessageDeltaStringsAreCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	const head = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	end := func(delta string) string {
		return fmt.Sprintf("event: message_delta\ndata: %s\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", delta)
	}
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"text in its delta", head + end(fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"text":%q},"usage":{"output_tokens":1}}`, words)), 8 + 2000},
		{"text at its top", head + end(fmt.Sprintf(`{"type":"message_delta","text":%q,"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`, words)), 8 + 2000},
		{"honest compact", head + end(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`), 8 + 2},
		{"honest with documented members", head + end(`{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":"This request was declined as it may be harmful"},"container":{"id":"container_011CPR5CNjB747bTd36fQLFk","expires_at":"2026-12-07T00:00:00Z"}},"context_management":{"applied_edits":[{"type":"clear_tool_uses_20250919","cleared_tool_uses":2}]},"usage":{"output_tokens":2}}`), 8 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}
