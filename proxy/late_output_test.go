package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// TestOutputUsageDoesNotCoverIsCharged: through real sockets, a lenient
// upstream that streams output its usage does not cover — text after the
// include_usage chunk, after response.completed, after a Messages
// message_delta or message_stop; a second, smaller usage; output that is
// not text llmguard counts (chat audio, Responses audio, reasoning fields)
// — is charged at least that output (or the output reservation when it
// cannot be counted), never the 1 token the usage claims. A stream whose
// usage arrives in every chunk (vLLM's continuous_usage_stats) is charged
// its last usage exactly.
func TestOutputUsageDoesNotCoverIsCharged(t *testing.T) {
	w := testWeigher(t)
	big := strings.Repeat("word ", 3000)
	bigTokens := w.CountText("gpt-4o-mini", big)
	est := w.Chat([]byte(panicStreamBody))
	chat := func(s string) string {
		return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
	}
	usage := func(out string) string {
		return `data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":` + out + `}}` + "\n\n"
	}
	const msgBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":50,"stream":true}`
	const respBody = `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":50,"stream":true}`
	msgStart := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	msgDelta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n"
	msgStop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	msgText := func(s string) string {
		return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + s + "\"}}\n\n"
	}
	completed := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	audio := strings.Repeat("QUFB", 20000)
	for _, tc := range []struct {
		name, path, body, stream string
		flavor                   Flavor
		atLeast                  int64
		exactly                  bool // charged must equal atLeast
	}{
		{"chat text after the usage chunk", "/v1/chat/completions", panicStreamBody,
			chat("hi") + usage("1") + chat(big) + "data: [DONE]\n\n", spec.FlavorOpenAI, 9 + bigTokens, false},
		{"chat usage in a content chunk, text after it", "/v1/chat/completions", panicStreamBody,
			`data: {"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}` + "\n\n" + chat(big) + "data: [DONE]\n\n",
			spec.FlavorOpenAI, 9 + bigTokens, false},
		{"chat second usage smaller", "/v1/chat/completions", panicStreamBody,
			chat("hi") + usage("5000") + usage("1") + "data: [DONE]\n\n", spec.FlavorOpenAI, 9 + 5000, false},
		{"chat usage in every chunk", "/v1/chat/completions", panicStreamBody,
			`data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"content":" b"}}],"usage":{"prompt_tokens":9,"completion_tokens":40}}` + "\n\n" +
				`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":40}}` + "\n\ndata: [DONE]\n\n",
			spec.FlavorOpenAI, 9 + 40, true},
		{"chat audio, no usage", "/v1/chat/completions", panicStreamBody,
			`data: {"choices":[{"index":0,"delta":{"audio":{"id":"a","data":"` + audio + `","transcript":"hi"}}}]}` + "\n\ndata: [DONE]\n\n",
			spec.FlavorOpenAI, est.InputTokens + est.OutputTokens, false},
		{"chat content as an array of parts, no usage", "/v1/chat/completions", panicStreamBody,
			`data: {"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"` + big + `"}]}}]}` + "\n\ndata: [DONE]\n\n",
			spec.FlavorOpenAI, est.InputTokens + est.OutputTokens, false},
		{"chat reasoning_content, no usage", "/v1/chat/completions", panicStreamBody,
			`data: {"choices":[{"index":0,"delta":{"reasoning_content":"` + big + `"}}]}` + "\n\ndata: [DONE]\n\n",
			spec.FlavorOpenAI, est.InputTokens + bigTokens, false},
		{"messages text between message_delta and message_stop", "/v1/messages", msgBody,
			msgStart + msgText("hi") + msgDelta + msgText(big) + msgStop, spec.FlavorAnthropic, 9 + bigTokens, false},
		{"messages without message_delta", "/v1/messages", msgBody,
			msgStart + msgText(big) + msgStop, spec.FlavorAnthropic, 9 + bigTokens, false},
		{"messages with the message_delta count as a string", "/v1/messages", msgBody,
			msgStart + msgText(big) + "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"5000\"}}\n\n" + msgStop,
			spec.FlavorAnthropic, 9 + bigTokens, false},
		{"messages text after message_stop", "/v1/messages", msgBody,
			msgStart + msgText("hi") + msgDelta + msgStop + msgText(big), spec.FlavorAnthropic, 9 + bigTokens, false},
		{"messages redacted thinking, cut", "/v1/messages", msgBody,
			msgStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"" + audio + "\"}}\n\n",
			spec.FlavorAnthropic, 9 + 50, false},
		{"messages delta of an unknown type, cut", "/v1/messages", msgBody,
			msgStart + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"future_delta\",\"data\":\"" + big + "\"}}\n\n",
			spec.FlavorAnthropic, 9 + 50, false},
		{"responses text after response.completed", "/v1/responses", respBody,
			completed + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + big + "\"}\n\n",
			spec.FlavorOpenAI, 9 + bigTokens, false},
		{"responses text only in a .done event, cut", "/v1/responses", respBody,
			"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"" + big + "\"}\n\n",
			spec.FlavorOpenAI, 9 + bigTokens, false},
		{"responses deltas and their .done, then usage", "/v1/responses", respBody,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a b\"}\n\n" +
				"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"a b\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":2}}}\n\n",
			spec.FlavorOpenAI, 9 + 2, true},
		{"responses audio, cut", "/v1/responses", respBody,
			"event: response.audio.delta\ndata: {\"type\":\"response.audio.delta\",\"delta\":\"" + audio + "\"}\n\n",
			spec.FlavorOpenAI, 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startRawUpstream(t, sseAnswer(tc.stream))
			r := newRig(t, rigOptions{url: up.url(), w: w, flavor: tc.flavor})
			full := r.remaining()
			status, _, b, err := r.do(tc.path, tc.body)
			if err != nil || status != 200 {
				t.Fatalf("status %d, err %v: %.200s", status, err, b)
			}
			r.waitLedger(1) // a stream settles after its last byte left
			charged := full - r.remaining()
			if charged < tc.atLeast || (tc.exactly && charged != tc.atLeast) {
				t.Errorf("charged %d, want %s%d", charged, map[bool]string{true: "", false: "at least "}[tc.exactly], tc.atLeast)
			}
		})
	}
}
