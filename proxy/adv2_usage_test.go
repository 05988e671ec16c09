package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// TestUpstreamUsageWithoutInputKeepsTheInput: through real sockets, an
// upstream whose usage says nothing readable about the input — a Messages
// stream whose message_start usage has no input figure (missing, a string,
// negative), an embeddings answer whose prompt_tokens is 0, negative or not
// a number — is charged at least the input llmguard weighed, never the 0
// input the figures it could not read would add up to (a 3000-word prompt
// settled at 3 tokens). A usage that reports the input is charged as
// reported.
func TestUpstreamUsageWithoutInputKeepsTheInput(t *testing.T) {
	w := testWeigher(t)
	prompt := strings.Repeat("word ", 3000)
	msgBody := `{"model":"gpt-4o-mini","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	embBody := `{"model":"text-embedding-3-small","input":"` + prompt + `"}`
	msgIn := w.Weigh(weigher.KindMessages, []byte(msgBody)).InputTokens
	embIn := w.Weigh(weigher.KindEmbeddings, []byte(embBody)).InputTokens
	if msgIn < 3000 || embIn < 3000 {
		t.Fatalf("estimates %d, %d: the prompt should weigh about 3000 tokens", msgIn, embIn)
	}
	messages := func(startUsage string) string {
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":" + startUsage + "}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi there\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	embeddings := func(usage string) string {
		return string(response([]byte(`{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"usage":` + usage + `}`)))
	}
	for _, tc := range []struct {
		name, path, body, answer string
		flavor                   Flavor
		atLeast                  int64
		exactly                  bool // charged must equal atLeast
	}{
		{"messages stream, no input figure", "/v1/messages", msgBody, sseAnswer(messages(`{"output_tokens":1}`)), spec.FlavorAnthropic, msgIn + 3, false},
		{"messages stream, input as a string", "/v1/messages", msgBody, sseAnswer(messages(`{"input_tokens":"3000","output_tokens":1}`)), spec.FlavorAnthropic, msgIn + 3, false},
		{"messages stream, negative input", "/v1/messages", msgBody, sseAnswer(messages(`{"input_tokens":-5,"output_tokens":1}`)), spec.FlavorAnthropic, msgIn + 3, false},
		{"messages stream, input reported", "/v1/messages", msgBody, sseAnswer(messages(`{"input_tokens":9,"output_tokens":1}`)), spec.FlavorAnthropic, 9 + 3, true},
		{"messages stream, input only in a cache field", "/v1/messages", msgBody, sseAnswer(messages(`{"cache_read_input_tokens":2999,"output_tokens":1}`)), spec.FlavorAnthropic, 2999 + 3, true},
		{"embeddings, prompt_tokens 0", "/v1/embeddings", embBody, embeddings(`{"prompt_tokens":0,"total_tokens":0}`), spec.FlavorOpenAI, embIn, false},
		{"embeddings, negative prompt_tokens", "/v1/embeddings", embBody, embeddings(`{"prompt_tokens":-50,"total_tokens":-50}`), spec.FlavorOpenAI, embIn, false},
		{"embeddings, prompt_tokens not a number", "/v1/embeddings", embBody, embeddings(`{"prompt_tokens":"many","total_tokens":7}`), spec.FlavorOpenAI, embIn, false},
		{"embeddings, prompt_tokens reported", "/v1/embeddings", embBody, embeddings(`{"prompt_tokens":7,"total_tokens":7}`), spec.FlavorOpenAI, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkCharged(t, chargedThrough(t, w, tc.answer, tc.flavor, tc.path, tc.body), tc.atLeast, tc.exactly)
		})
	}
}

// TestStreamBytesNoEventCarriesAreUnread: through real sockets, an answer
// labelled text/event-stream whose output rides in lines no SSE reader
// dispatches — a JSON chat completion sent as the "stream", chunks in a
// misspelled field — reaches the client but carries no event the tap reads:
// it is charged at least the output reservation (as an event too large to
// read is) and the text those lines hold, counted with their syntax, never
// output 0. Comments, "event", "id" and "retry" lines are
// not output: a stream of them and readable chunks is charged its counted
// text exactly.
func TestStreamBytesNoEventCarriesAreUnread(t *testing.T) {
	w := testWeigher(t)
	big := strings.Repeat("word ", 3000)
	est := w.Chat([]byte(panicStreamBody))
	bigTokens := w.CountText("gpt-4o-mini", big)
	chunk := `{"choices":[{"index":0,"delta":{"content":"` + big + `"}}]}`
	answer := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + big + `"}}]}`
	for _, tc := range []struct {
		name, stream string
		atLeast      int64
		exactly      bool // charged must equal atLeast
	}{
		{"a JSON answer as the stream", answer + "\n\n", est.InputTokens + bigTokens, false},
		{"a JSON answer, CR line ends", answer + "\r\r", est.InputTokens + bigTokens, false},
		{"chunks in a misspelled field", "dat: " + chunk + "\n\ndata: [DONE]\n\n", est.InputTokens + bigTokens, false},
		{"chunks in a field named with no value", "data" + chunk + "\n\ndata: [DONE]\n\n", est.InputTokens + bigTokens, false},
		{"a short stray line", "x\n\ndata: [DONE]\n\n", est.InputTokens + est.OutputTokens, false},
		// The same stray bytes in an event that also has a data line (a
		// review found these charged output 0 while only data-less events
		// were looked at).
		{"a JSON answer, then data: [DONE] with no blank line", answer + "\ndata: [DONE]\n\n", est.InputTokens + bigTokens, false},
		{"data: [DONE], then a JSON answer", "data: [DONE]\n" + answer + "\n\n", est.InputTokens + bigTokens, false},
		{"a chunk's data line and a stray field in one event", "data: " + `{"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\nfoo: " + big + "\n\ndata: [DONE]\n\n",
			est.InputTokens + bigTokens, false},
		// A data event whose chunk carries a whole answer's "message"
		// (not a "delta"): read, but its output is not counted.
		{"a whole answer as a data event", "data: " + answer + "\n\ndata: [DONE]\n\n", est.InputTokens + est.OutputTokens, false},
		{"comments, event, id and retry lines", ": keep-alive\r\n\r\nevent: ping\nid: 7\nretry: 100\n\n:\n\ndata: " + chunk + "\n\nevent\n\ndata: [DONE]\n\n",
			est.InputTokens + bigTokens, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			charged := chargedThrough(t, w, sseAnswer(tc.stream), spec.FlavorOpenAI, "/v1/chat/completions", panicStreamBody)
			checkCharged(t, charged, tc.atLeast, tc.exactly)
		})
	}
}

// chargedThrough sends body to path through a proxy whose upstream answers
// answer (raw bytes), waits for its ledger line and returns what the
// request took from its token bucket, in tokens.
func chargedThrough(t *testing.T, w *weigher.Weigher, answer string, flavor spec.Flavor, path, body string) int64 {
	t.Helper()
	up := startRawUpstream(t, answer)
	r := newRig(t, rigOptions{url: up.url(), w: w, flavor: flavor})
	full := r.remaining()
	status, _, b, err := r.do(path, body)
	if err != nil || status != 200 {
		t.Fatalf("status %d, err %v: %.200s", status, err, b)
	}
	r.waitLedger(1)
	return full - r.remaining()
}

// checkCharged wants charged at least atLeast tokens, or exactly that many.
func checkCharged(t *testing.T, charged, atLeast int64, exactly bool) {
	t.Helper()
	if charged < atLeast || (exactly && charged != atLeast) {
		t.Errorf("charged %d, want %s%d", charged, map[bool]string{true: "", false: "at least "}[exactly], atLeast)
	}
}
