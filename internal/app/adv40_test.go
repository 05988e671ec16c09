package app

// Adversarial tests of adv40 (2026-12-06): stream shapes adv39 left
// uncounted — a Messages content_block_delta or content_block_start of a
// type llmguard does not know, a chat chunk whose "choices" is an object —
// beside a usage reporting 1 output token. Each drives llmguard through
// loopback sockets to an upstream whose stream the test sets, and checks
// what the bucket was charged.

import (
	"fmt"
	"strings"
	"testing"
)

// A Messages stream whose text came in a content_block_delta of a type
// llmguard does not know (a future foo_delta, its text under "text" or
// any member), or in a content_block_start of an unknown block type,
// beside a message_delta reporting 1 output token was charged 9 tokens
// (the delta was only marked Uncounted, which a usage settles; the block
// read nothing). Their string text is now counted and checked against
// the usage as a text_delta's is: 2,008 (at least the output reservation,
// 1,000 here, as for any stream with output not all read). An honest
// stream, whose usage covers the text, is charged its usage, unknown
// delta or not.
func TestAdv40UnknownMessagesDeltaTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n"
	block := func(b string) string {
		return fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":%s}\n\n", b)
	}
	delta := func(d string) string {
		return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":%s}\n\n", d)
	}
	const stop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	end := func(out int) string {
		return fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", out) +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	textBlock := block(`{"type":"text","text":""}`)
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"unknown delta's text", start + textBlock + delta(fmt.Sprintf(`{"type":"foo_delta","text":%q}`, words)) + stop + end(1), 8 + 2000},
		{"unknown delta's nested string", start + textBlock + delta(fmt.Sprintf(`{"type":"foo_delta","payload":{"parts":[{"value":%q}]}}`, words)) + stop + end(1), 8 + 2000},
		{"unknown block's text", start + block(fmt.Sprintf(`{"type":"foo","text":%q}`, words)) + stop + end(1), 8 + 2000},
		{"unknown block's thinking", start + block(fmt.Sprintf(`{"type":"foo","thinking":%q}`, words)) + stop + end(1), 8 + 2000},
		{"honest unknown delta", start + textBlock + delta(fmt.Sprintf(`{"type":"foo_delta","text":%q}`, words)) + stop + end(2500), 8 + 2500},
		{"honest text_delta", start + textBlock + delta(fmt.Sprintf(`{"type":"text_delta","text":%q}`, words)) + stop + end(2500), 8 + 2500},
		{"honest tool blocks", start + block(`{"type":"server_tool_use","id":"s","name":"web_search","input":{}}`) +
			delta(`{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}`) + stop +
			strings.ReplaceAll(block(`{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"https://example.com","title":"t","encrypted_content":"QUJDRA"}]}`), `"index":0`, `"index":1`) +
			strings.ReplaceAll(stop, `"index":0`, `"index":1`) + end(1), 8 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d (8 input tokens and %d bytes of output)", got, tc.least, tc.least+10, len(words))
			}
		})
	}
}

// A chat stream whose chunk sent "choices" as an object — one choice bare,
// or choices keyed by index — counted nothing: 2,000 words so beside a
// usage of 1 output token were charged 9 tokens. Such a chunk is now
// Uncounted and its text read as a JSON answer's (each reading of the
// object): 2,008.
func TestAdv40ChoicesObjectTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	chunk := func(choices string) string {
		return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":%s}\n\n", choices)
	}
	const fin = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	usage := func(out int) string {
		return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", out)
	}
	for _, tc := range []struct {
		name   string
		stream string
		want   int64 // tokens the bucket must lose
	}{
		{"one choice bare", chunk(fmt.Sprintf(`{"index":0,"delta":{"content":%q}}`, words)) + fin + usage(1), 8 + 2000},
		{"choices keyed by index", chunk(fmt.Sprintf(`{"0":{"index":0,"delta":{"content":%q}}}`, words)) + fin + usage(1), 8 + 2000},
		// Chunks of one shape (read past the first on the chunk skeleton's
		// fast path) are each counted: four of 500 words and a space,
		// 2,001 tokens counted.
		{"many bare choices", strings.Repeat(chunk(fmt.Sprintf(`{"index":0,"delta":{"content":%q}}`, words[:len(words)/4+1])), 4) + fin + usage(1), 8 + 2001},
		// review20: a choice, or its delta, sent as its text.
		{"choice as a string", chunk(fmt.Sprintf(`[%q]`, words)) + fin + usage(1), 8 + 2000},
		{"delta as a string", chunk(fmt.Sprintf(`[{"index":0,"delta":%q}]`, words)) + fin + usage(1), 8 + 2000},
		{"many string deltas", strings.Repeat(chunk(fmt.Sprintf(`[{"index":0,"delta":%q}]`, words[:len(words)/4+1])), 4) + fin + usage(1), 8 + 2001},
		{"honest", chunk(fmt.Sprintf(`[{"index":0,"delta":{"content":%q}}]`, words)) + fin + usage(2500), 8 + 2500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, b := answerCost(t, false, "text/event-stream", tc.stream, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
			if !strings.Contains(b, "word word") {
				t.Fatalf("the caller did not get the text: %.300s", b)
			}
			if got != tc.want {
				t.Errorf("the bucket lost %d tokens, want %d (8 input tokens and %d bytes of text beside a small output figure)", got, tc.want, len(words))
			}
		})
	}
}
