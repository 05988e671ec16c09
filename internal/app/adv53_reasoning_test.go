package app

import "testing"

// adv53: model families whose reasoning is hidden by default, through a
// lenient upstream that ends a stream without a usage. xAI's grok-4 and
// later (docs.x.ai's reasoning guide: no reasoning_content, reasoning
// billed apart), an OpenAI fine-tune of o4-mini ("ft:o4-mini-…"), an
// alias of o3 (alias_of), and o3 named in a Messages body (a gateway's
// /v1/messages serves any model) are charged at least the output
// reservation (8,000), not the 3 words shown: before adv53 the fine-tune
// and the Messages body were charged ~10 tokens. A grok non-reasoning
// variant, and DeepSeek's reasoner, whose reasoning streams as
// reasoning_content and is counted as text, are charged what they showed.
func TestAdv53HiddenReasoningFamiliesStreamWithoutUsage(t *testing.T) {
	const reserved = 8000
	chunk := func(delta string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	stop := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	chat := chunk(`{"role":"assistant","content":"Hi."}`) + stop
	thought := "Let me think about what the user wants here; a greeting seems right, so I will answer with one short word of welcome."
	deepseek := chunk(`{"role":"assistant","content":null,"reasoning_content":"`+thought+`"}`) + chunk(`{"content":"Hi."}`) + stop
	chatBody := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8000,"stream":true}`
	}
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	msgs := ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"o3","content":[],"stop_reason":null,"usage":{"input_tokens":8,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`) + ev("message_stop", `{"type":"message_stop"}`)
	const models = `  o3: {input_usd_per_mtok: 2, output_usd_per_mtok: 8}
  team-thinker: {alias_of: o3}
  grok-4: {input_usd_per_mtok: 3, output_usd_per_mtok: 15}
  grok-4-fast-non-reasoning: {input_usd_per_mtok: 0.2, output_usd_per_mtok: 0.5}
  deepseek-reasoner: {input_usd_per_mtok: 0.55, output_usd_per_mtok: 2.19}
`
	for _, tc := range []struct {
		name, path, body, events string
		least, most              int64
	}{
		{"grok-4", "/v1/chat/completions", chatBody("grok-4"), chat, reserved, reserved + 100},
		{"x-ai/grok-4.1-fast-reasoning", "/v1/chat/completions", chatBody("x-ai/grok-4.1-fast-reasoning"), chat, reserved, reserved + 100},
		{"ft:o4-mini", "/v1/chat/completions", chatBody("ft:o4-mini-2025-04-16:acme::abc123"), chat, reserved, reserved + 100},
		{"alias of o3", "/v1/chat/completions", chatBody("team-thinker"), chat, reserved, reserved + 100},
		{"o3 in a Messages body", "/v1/messages", `{"model":"o3","max_tokens":8000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, msgs, reserved, reserved + 100},
		{"grok-4-fast-non-reasoning", "/v1/chat/completions", chatBody("grok-4-fast-non-reasoning"), chat, 9, 20},
		{"deepseek-reasoner, reasoning shown", "/v1/chat/completions", chatBody("deepseek-reasoner"), deepseek, 30, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv52TokensCost(t, models, adv52SSE(tc.events), tc.path, tc.body)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the token bucket lost %d, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}
