package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// TestResponsesStreamItemTextWithoutUsage: through real sockets, a
// Responses stream whose text came only in response.output_item.done or
// response.content_part.done events (or their .added events, which an
// honest stream sends empty: counted once when the .done repeats them), and whose terminal event carries
// neither a usage nor response.output (or an in-band error ends it), is
// charged that text, counted once, never output 0 (it was charged its
// input alone); text past what the stream remembers (64 KiB) keeps the
// output reservation, beside the text remembered. Beside a usage the
// items' text no delta streamed is checked against it as streamed text is
// (adv39): a usage of 1,000 output tokens beside 3,000 words only in an
// item is charged the words (it was charged 1,000: the usage was taken as
// the bill whatever the items held); an honest item's text no delta
// streamed (a function call's name) is a few bytes, which never raise an
// honest usage. Without a usage, text the deltas streamed is not
// counted again when the terminal output repeats it beside text they did
// not stream (a second item, a function call's name): it was, up to twice
// the visible text.
func TestResponsesStreamItemTextWithoutUsage(t *testing.T) {
	w := testWeigher(t)
	const model = "gpt-4o-mini"
	const body = `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":4000,"stream":true}`
	est := w.Weigh(weigher.KindResponses, []byte(body))
	big := strings.Repeat("word ", 3000)
	other := strings.Repeat("note ", 2000)
	msg := func(text string) string {
		return `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`
	}
	sse := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	itemDone := func(item string) string { return sse("response.output_item.done", `,"output_index":0,"item":`+item) }
	partDone := sse("response.content_part.done", `,"part":{"type":"output_text","text":"`+big+`"}`)
	// The added events (items37): an honest stream sends them empty; a
	// hostile one may hold its text there alone.
	itemAdded := func(item string) string { return sse("response.output_item.added", `,"output_index":0,"item":`+item) }
	partAdded := sse("response.content_part.added", `,"part":{"type":"output_text","text":"`+big+`"}`)
	delta := sse("response.output_text.delta", `,"delta":"`+big+`"`)
	completed := func(rest string) string {
		return sse("response.completed", `,"response":{"status":"completed"`+rest+`}`)
	}
	args := strings.Repeat(`{\"city\":\"Paris\"}`, 300)
	call := `{"type":"function_call","name":"get_weather","arguments":"` + args + `"}`
	argsText := strings.Repeat(`{"city":"Paris"}`, 300)
	for _, tc := range []struct {
		name, stream string
		want         int64
	}{
		{"text only in output_item.done", itemDone(msg(big)) + completed(""), est.InputTokens + w.CountText(model, big)},
		{"text in content_part.done and output_item.done", partDone + itemDone(msg(big)) + completed(""), est.InputTokens + w.CountText(model, big)},
		{"text only in output_item.done, then an error", itemDone(msg(big)) + sse("error", `,"message":"boom"`), est.InputTokens + w.CountText(model, big)},
		{"text only in output_item.added", itemAdded(msg(big)) + completed(""), est.InputTokens + w.CountText(model, big)},
		{"text only in content_part.added", itemAdded(msg("")) + partAdded + completed(""), est.InputTokens + w.CountText(model, big)},
		{"text in output_item.added and its output_item.done, counted once", itemAdded(msg(big)) + partAdded + partDone + itemDone(msg(big)) + completed(""), est.InputTokens + w.CountText(model, big)},
		{"a usage below the text only in output_item.added", itemAdded(msg(big)) + completed(`,"usage":{"input_tokens":7,"output_tokens":1000}`), 7 + w.CountText(model, big)},
		{"a usage below the text only in output_item.done", itemDone(msg(big)) + completed(`,"usage":{"input_tokens":7,"output_tokens":1000}`), 7 + w.CountText(model, big)},
		{"a usage above the text only in output_item.done (control: the usage stands)", itemDone(msg(big)) + completed(`,"usage":{"input_tokens":7,"output_tokens":5000}`), 7 + 5000},
		{"one item streamed, one only in the terminal output", delta + completed(`,"output":[`+msg(big)+`,`+msg(other)+`]`), est.InputTokens + w.CountText(model, big+other)},
		{"arguments streamed, the name only in the terminal output", sse("response.function_call_arguments.delta", `,"delta":"`+args+`"`) + completed(`,"output":[`+call+`]`), est.InputTokens + w.CountText(model, argsText+"get_weather")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charged := chargedThrough(t, w, sseAnswer(tc.stream), spec.FlavorOpenAI, "/v1/responses", body)
			checkCharged(t, charged, tc.want, true)
		})
	}
	// Past the 64 KiB remembered: the output reservation, when larger than
	// the text remembered.
	const bigBody = `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":16000,"stream":true}`
	bigEst := w.Weigh(weigher.KindResponses, []byte(bigBody))
	huge := strings.Repeat("word ", 14000) // 70,000 bytes
	if kept := w.CountText(model, huge[:64<<10]); kept >= bigEst.OutputTokens {
		t.Fatalf("the text remembered (%d tokens) is not below the reservation (%d)", kept, bigEst.OutputTokens)
	}
	t.Run("text only in an item past the memory's 64 KiB", func(t *testing.T) {
		charged := chargedThrough(t, w, sseAnswer(itemDone(msg(huge))+completed("")), spec.FlavorOpenAI, "/v1/responses", bigBody)
		checkCharged(t, charged, bigEst.InputTokens+bigEst.OutputTokens, true)
	})
}
