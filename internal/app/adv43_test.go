package app

// Adversarial tests of adv43 (2026-12-07): the Messages stream events
// adv41 left read in part — message_start, content_block_start, a
// message_delta's stop_sequence and an in-band error — carrying text
// beside a usage reporting 1 output token. Each drives llmguard through
// loopback sockets to an upstream whose stream the test sets
// (answerCost), and checks what the bucket was charged.

import (
	"fmt"
	"strings"
	"testing"
)

// adv43Cost is what the bucket lost for a Messages stream (answerCost).
func adv43Cost(t *testing.T, stream string) int64 {
	t.Helper()
	got, _ := answerCost(t, true, "text/event-stream", stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
	return got
}

// adv43Event is one SSE event of a Messages stream.
func adv43Event(name, data string) string { return fmt.Sprintf("event: %s\ndata: %s\n\n", name, data) }

const (
	adv43Start    = `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}}`
	adv43Block    = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	adv43Delta    = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`
	adv43Stop     = `{"type":"content_block_stop","index":0}`
	adv43EndDelta = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`
)

// adv43Stream is a Messages stream of one text block ("Hi"), each event
// replaced where the argument is not "".
func adv43Stream(start, block, delta string) string {
	if start == "" {
		start = adv43Start
	}
	if block == "" {
		block = adv43Block
	}
	if delta == "" {
		delta = adv43EndDelta
	}
	return adv43Event("message_start", start) + adv43Event("content_block_start", block) +
		adv43Event("content_block_delta", adv43Delta) + adv43Event("content_block_stop", adv43Stop) +
		adv43Event("message_delta", delta) + adv43Event("message_stop", `{"type":"message_stop"}`)
}

// A Messages stream carrying 2,000 words in a member its message_start's
// message does not document (or beside the message), in its
// content_block_start beside the block or in a text block's undocumented
// member, or in a message_delta's stop_sequence or stop_reason, beside a
// usage of 1 output token, was charged 9 tokens (8 input, 1 output): those
// strings were not read. They are now counted against the usage: 2,008.
// The events Anthropic sends, compact or with their documented members,
// are charged exactly as before.
func TestAdv43StrayMessageStartStringsAreCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	startWith := func(extra string) string {
		return `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,` + extra + `"usage":{"input_tokens":8,"output_tokens":1}}}`
	}
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"text in message.text", adv43Stream(startWith(fmt.Sprintf(`"text":%q,`, words)), "", ""), 8 + 2000},
		{"text beside message", adv43Stream(fmt.Sprintf(`{"type":"message_start","text":%q,"message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}}`, words), "", ""), 8 + 2000},
		{"text in message.stop_sequence", adv43Stream(strings.Replace(adv43Start, `"stop_sequence":null`, fmt.Sprintf(`"stop_sequence":%q`, words), 1), "", ""), 8 + 2000},
		{"text in message_delta stop_sequence", adv43Stream("", "", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":%q},"usage":{"output_tokens":1}}`, words)), 8 + 2000},
		{"text in message_delta stop_reason", adv43Stream("", "", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":1}}`, strings.ReplaceAll(words, " ", "_"))), 8 + 2000},
		{"honest compact", adv43Stream("", "", strings.Replace(adv43EndDelta, `"output_tokens":1`, `"output_tokens":2`, 1)), 8 + 2},
		{"honest with documented members", adv43Stream(startWith(`"container":{"id":"container_011CPR5CNjB747bTd36fQLFk","expires_at":"2026-12-07T00:00:00Z"},"stop_details":null,`), "", strings.Replace(adv43EndDelta, `"output_tokens":1`, `"output_tokens":2`, 1)), 8 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv43Cost(t, tc.stream)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}

// A content_block_start carrying 2,000 words beside its block, or in a
// text block's member the API does not document, beside a usage of 1
// output token, was charged 9 tokens; now 2,008. A thinking block that
// starts with a non-empty signature marks output llmguard cannot count
// (as a signature_delta does): without a usage, the output reservation
// (max_tokens 1,000) stands, where 8 + 1 was charged.
func TestAdv43StrayBlockStartStringsAreCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"text beside the block", adv43Stream("", fmt.Sprintf(`{"type":"content_block_start","index":0,"text":%q,"content_block":{"type":"text","text":""}}`, words), ""), 8 + 2000},
		{"text in a text block's member", adv43Stream("", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","note":%q}}`, words), ""), 8 + 2000},
		{"text in a thinking block's member", adv43Stream("", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":"","x":[%q]}}`, words), ""), 8 + 2000},
		{"signed thinking start, no usage", adv43Event("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8}}}`) +
			adv43Event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":"EqQBCkYIBRgCIkB"}}`) +
			adv43Event("content_block_stop", adv43Stop) + adv43Event("message_stop", `{"type":"message_stop"}`), 8 + 1000},
		{"honest text block with citations", adv43Stream("", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":[{"type":"char_location","cited_text":"a quoted source","document_index":0}]}}`, strings.Replace(adv43EndDelta, `"output_tokens":1`, `"output_tokens":2`, 1)), 8 + 2},
		{"honest empty thinking block", adv43Stream("", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`, strings.Replace(adv43EndDelta, `"output_tokens":1`, `"output_tokens":2`, 1)), 8 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv43Cost(t, tc.stream)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}

// An in-band error event carrying 2,000 words in its message after the
// answer began (message_start's usage: 1 output token) was charged 9
// tokens; its strings but its types are now counted: 2,008. An error
// sent before message_start is refunded, as before, whatever it says.
func TestAdv43ErrorTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	errEvent := func(msg string) string {
		return adv43Event("error", fmt.Sprintf(`{"type":"error","error":{"type":"overloaded_error","message":%q}}`, msg))
	}
	begun := adv43Event("message_start", adv43Start) + adv43Event("content_block_start", adv43Block) + adv43Event("content_block_delta", adv43Delta)
	for _, tc := range []struct {
		name        string
		stream      string
		least, most int64 // tokens the bucket must lose
	}{
		{"long message after message_start", begun + errEvent(words), 8 + 2000, 8 + 2010},
		{"honest overloaded after message_start", begun + errEvent("Overloaded"), 8 + 1, 8 + 4},
		{"error first", errEvent(words), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv43Cost(t, tc.stream)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}
