package app

// Adversarial tests of adv39 (2026-12-06): output a lenient upstream sends
// in a shape the stream reader did not count as text, beside a usage
// reporting almost none. Each drives llmguard through loopback sockets to
// an upstream whose answer the test sets, and checks what the bucket was
// charged.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// A chat stream whose text came in a shape the chunk reader marks
// Uncounted — a delta's content as a list of parts (Mistral's streams), a
// whole message in a chunk, a chat choice's "text", an audio transcript —
// beside a final usage reporting 1 output token was charged that 1 token:
// 2,000 words streamed so cost 9 tokens where the same text as a
// delta's content string cost 2,008 (the usage checked against the text,
// TestAdv12SmallOutputBesideMuchTextChargedTheText), and a JSON answer's
// audio transcript likewise cost 9. Such text is now read as a JSON
// answer's is and checked the same way: 2,008. An honest audio stream,
// whose usage reports more than its transcript, is charged its usage.
func TestAdv39UncountedStreamTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	chunk := func(choice string) string {
		return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,%s}]}\n\n", choice)
	}
	const fin = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	usage := func(out int) string {
		return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", out)
	}
	for _, tc := range []struct {
		name   string
		stream bool
		answer string // the stream's events, or the JSON answer's choice members
		want   int64  // tokens the bucket must lose
	}{
		{"stream content parts", true, chunk(fmt.Sprintf(`"delta":{"content":[{"type":"text","text":%q}]}`, words)) + fin + usage(1), 8 + 2000},
		{"stream message", true, chunk(fmt.Sprintf(`"message":{"role":"assistant","content":%q}`, words)) + fin + usage(1), 8 + 2000},
		{"stream text", true, chunk(fmt.Sprintf(`"text":%q`, words)) + fin + usage(1), 8 + 2000},
		{"stream audio transcript", true, chunk(fmt.Sprintf(`"delta":{"audio":{"id":"a","transcript":%q}}`, words)) + fin + usage(1), 8 + 2000},
		{"honest audio stream", true, chunk(fmt.Sprintf(`"delta":{"audio":{"id":"a","data":"UklGRiQAAABXQVZF","transcript":%q}}`, words)) + fin + usage(9000), 8 + 9000},
		{"json audio transcript", false, fmt.Sprintf(`"message":{"role":"assistant","content":null,"audio":{"id":"a","data":"","transcript":%q}}`, words), 8 + 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, answer := "text/event-stream", tc.answer
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]`
			if tc.stream {
				body += `,"stream":true,"stream_options":{"include_usage":true}`
			} else {
				ct, answer = "application/json", fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1}}`, tc.answer)
			}
			got, b := answerCost(t, false, ct, answer, "/v1/chat/completions", body+`}`)
			if !strings.Contains(b, "word word") {
				t.Fatalf("the caller did not get the text: %.300s", b)
			}
			if got != tc.want {
				t.Errorf("the bucket lost %d tokens, want %d (usage: 8 input tokens and %d bytes of text beside a small output figure)", got, tc.want, len(words))
			}
		})
	}
}

// A Messages stream whose output arrived whole where the stream reader did
// not count it — in message_start's message.content, or in a tool_use
// block's input at its content_block_start — beside a message_delta
// reporting 1 output token was charged that 1 token, where the same
// blocks in a JSON answer are counted (messagesAnswerText). They are now
// read as a JSON answer's blocks are, and the usage they contradict is
// charged the text (at least the output reservation, as for any stream
// with output llmguard could not all read: max_tokens 1000 here, below the
// text's 2,000 tokens).
func TestAdv39UncountedMessagesTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	start := func(content string) string {
		return fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":%s,\"stop_reason\":null,\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n", content)
	}
	const end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"message_start content", start(fmt.Sprintf(`[{"type":"text","text":%q}]`, words)) + end, 8 + 2000},
		{"tool_use input at its start", start("[]") +
			fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{\"q\":%q}}}\n\n", words) +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" + end, 8 + 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, true, "text/event-stream", tc.stream, "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`, "anthropic-version", "2023-06-01")
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d (8 input tokens and %d bytes of output beside output_tokens 1)", got, tc.least, tc.least+10, len(words))
			}
		})
	}
}

// A Responses stream whose text came only in its items — an
// output_item.done or .added item, a content_part.done part, the terminal
// event's response.output — beside a usage of 1 output token was charged
// that 1 token: what the items held was never counted beside a usage,
// where a JSON answer holding the same output is checked against its
// bytes. The items' text no delta showed is now checked against the usage
// as the deltas' is; an honest stream, whose deltas carry the text the
// items repeat, is charged its usage.
func TestAdv39ResponsesItemTextBesideASmallUsage(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	item := fmt.Sprintf(`{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}`, words)
	completed := func(output string, out int) string {
		return fmt.Sprintf("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":%s,\"usage\":{\"input_tokens\":8,\"output_tokens\":%d,\"total_tokens\":%d}}}\n\n", output, out, 8+out)
	}
	itemDone := fmt.Sprintf("event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":%s}\n\n", item)
	partDone := fmt.Sprintf("event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":%q}}\n\n", words)
	delta := fmt.Sprintf("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":%q}\n\n", words)
	for _, tc := range []struct {
		name   string
		stream string
		want   int64 // tokens the bucket must lose
	}{
		{"output_item.done", itemDone + completed("[]", 1), 8 + 2000},
		{"output_item.added", strings.ReplaceAll(itemDone, "output_item.done", "output_item.added") + completed("[]", 1), 8 + 2000},
		{"content_part.done", partDone + completed("[]", 1), 8 + 2000},
		{"response.output", completed("["+item+"]", 1), 8 + 2000},
		{"honest", delta + partDone + itemDone + completed("["+item+"]", 2500), 8 + 2500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := answerCost(t, false, "text/event-stream", tc.stream, "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":1000,"stream":true}`)
			if got != tc.want {
				t.Errorf("the bucket lost %d tokens, want %d (8 input tokens, %d bytes of text)", got, tc.want, len(words))
			}
		})
	}
}

// answerCost runs one call to path with body (and header name/value
// pairs) through an app under a 100,000-token user bucket whose upstream
// answers every POST with answer as contentType (the Anthropic flavor
// beside OpenAI's when anthropic: twoFlavorConfig), on a frozen clock, and
// returns the tokens the bucket lost and the caller's answer body; a
// status other than 200 fails t.
func answerCost(t *testing.T, anthropic bool, contentType, answer, path, body string, headers ...string) (int64, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // the harness's probe of its bucket
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	text := baseConfig(t, srv.URL, `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`)
	if anthropic {
		text = twoFlavorConfig(srv.URL, "user-tpd", 100000)
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := h.tokensLeft()
	resp, b := h.do(path, body, headers...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.300s", resp.StatusCode, b)
	}
	return left - h.tokensLeft(), b
}
