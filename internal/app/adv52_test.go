package app

// Adversarial tests of adv52 (2026-12-07): lenient upstreams and rarely
// exercised flavors. Each drives llmguard through loopback sockets to an
// upstream the test sets.

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// adv52TokensCost is what alice's token bucket (user-tpm, 1,000,000
// tokens) lost for one call of body to path whose upstream writes raw,
// a whole HTTP answer; models are extra models: entries.
func adv52TokensCost(t *testing.T, models, raw, path, body string) int64 {
	t.Helper()
	url := startRawUpstream(t, func(c net.Conn) { io.WriteString(c, raw) })
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + models + userTokensLimit("user-tpm", 1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := rateLimitRemaining(t, h.probe(), "user-tpm")
	resp, _ := h.do(path, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want the upstream's 200", resp.StatusCode)
	}
	return left - rateLimitRemaining(t, h.probe(), "user-tpm")
}

// adv52SSE is a 200 answer of events, labelled text/event-stream.
func adv52SSE(events string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(events), events)
}

// A reasoning model bills its reasoning as output, and no stream shows it:
// OpenAI's chat chunks carry none of it, a Responses stream a reasoning
// item with (by default) an empty summary. A lenient upstream (a gateway
// that drops stream_options, or the usage chunk) that ends such a stream
// properly ([DONE], response.completed) without a usage had it charged
// the text it showed: 10 tokens for a call reserving 8,000 that the
// upstream billed 5,000 reasoning tokens. It is now charged at least its
// output reservation when the body asks for reasoning, its model reasons
// by default, or (Responses) the stream showed a reasoning item, and a
// Messages stream of a request with thinking on (Claude 4 streams a
// summary of its thinking) that reports no output usage likewise; a
// stream that reports its usage, and one of a model asked to reason in
// no way, are charged as before.
func TestAdv52HiddenReasoningStreamWithoutUsage(t *testing.T) {
	const reserved = 8000
	chat := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	usage := `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":5000,"total_tokens":5008,"completion_tokens_details":{"reasoning_tokens":4998}}}` + "\n\n"
	chatBody := func(model, extra string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8000,"stream":true` + extra + `}`
	}
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	reasoningItem := `{"id":"rs_1","type":"reasoning","summary":[]}`
	created := ev("response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}`)
	items := ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":`+reasoningItem+`}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":`+reasoningItem+`}`)
	text := ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"Hi."}`)
	completed := ev("response.completed", `{"type":"response.completed","response":{"id":"r","status":"completed"}}`)
	completedWithItem := ev("response.completed", `{"type":"response.completed","response":{"id":"r","status":"completed","output":[`+reasoningItem+`]}}`)
	respBody := func(model, extra string) string {
		return `{"model":"` + model + `","input":"hi","max_output_tokens":8000,"stream":true` + extra + `}`
	}
	// A Messages stream (Claude 4 streams a summary of its thinking and
	// bills the whole) from an upstream that sent no signature and no
	// output usage.
	msgStart := ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":8,"output_tokens":1}}}`)
	msgThinking := ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Summary."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	msgText := ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	msgEnd := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`) + ev("message_stop", `{"type":"message_stop"}`)
	msgEndUsage := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3000}}`) + ev("message_stop", `{"type":"message_stop"}`)
	msgBody := func(extra string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":8000,"stream":true` + extra + `,"messages":[{"role":"user","content":"hi"}]}`
	}
	const o3 = "  o3: {input_usd_per_mtok: 2, output_usd_per_mtok: 8}\n"
	for _, tc := range []struct {
		name, path, body, events string
		least, most              int64
	}{
		// Hidden reasoning, no usage: at least the reservation.
		{"chat, reasoning_effort, no usage", "/v1/chat/completions", chatBody("gpt-4o-mini", `,"reasoning_effort":"high"`), chat + "data: [DONE]\n\n", reserved, reserved + 100},
		{"chat, OpenRouter reasoning excluded, no usage", "/v1/chat/completions", chatBody("gpt-4o-mini", `,"reasoning":{"effort":"high","exclude":true}`), chat + "data: [DONE]\n\n", reserved, reserved + 100},
		{"chat, Anthropic thinking through a gateway, no usage", "/v1/chat/completions", chatBody("claude-sonnet-4-5", `,"thinking":{"type":"enabled","budget_tokens":5000}`), chat + "data: [DONE]\n\n", reserved, reserved + 100},
		{"chat, o3, no usage", "/v1/chat/completions", chatBody("o3", ""), chat + "data: [DONE]\n\n", reserved, reserved + 100},
		{"chat, o3, every choice finished, no DONE, no usage", "/v1/chat/completions", chatBody("o3", ""), chat, reserved, reserved + 100},
		{"responses, o3, no item, no usage", "/v1/responses", respBody("o3", ""), created + text + completed, reserved, reserved + 100},
		{"responses, reasoning asked, no usage", "/v1/responses", respBody("gpt-4o-mini", `,"reasoning":{"effort":"low"}`), created + text + completed, reserved, reserved + 100},
		{"responses, a reasoning item streamed, no usage", "/v1/responses", respBody("gpt-4o-mini", ""), created + items + text + completed, reserved, reserved + 100},
		{"responses, a reasoning item in the terminal output, no usage", "/v1/responses", respBody("gpt-4o-mini", ""), created + text + completedWithItem, reserved, reserved + 100},
		{"messages, thinking, no output usage", "/v1/messages", msgBody(`,"thinking":{"type":"enabled","budget_tokens":5000}`), msgStart + msgThinking + msgText + msgEnd, reserved, reserved + 100},
		// A usage settles the stream; no reasoning asked, shown or by
		// default: the text, as before.
		{"chat, o3, usage", "/v1/chat/completions", chatBody("o3", ""), chat + usage + "data: [DONE]\n\n", 5008, 5008},
		{"chat, o3, usage after DONE", "/v1/chat/completions", chatBody("o3", ""), chat + "data: [DONE]\n\n" + usage, 5008, 5008},
		{"chat, no reasoning, no usage", "/v1/chat/completions", chatBody("gpt-4o-mini", ""), chat + "data: [DONE]\n\n", 9, 20},
		{"chat, reasoning_effort none, no usage", "/v1/chat/completions", chatBody("gpt-4o-mini", `,"reasoning_effort":"none"`), chat + "data: [DONE]\n\n", 9, 20},
		{"responses, no reasoning, no usage", "/v1/responses", respBody("gpt-4o-mini", ""), created + text + completed, 5, 20},
		{"messages, thinking, usage", "/v1/messages", msgBody(`,"thinking":{"type":"enabled","budget_tokens":5000}`), msgStart + msgThinking + msgText + msgEndUsage, 3008, 3008},
		{"messages, thinking disabled, no output usage", "/v1/messages", msgBody(`,"thinking":{"type":"disabled"}`), msgStart + msgText + msgEnd, 9, 20},
		// An in-band error before any output is still refunded.
		{"chat, o3, error alone", "/v1/chat/completions", chatBody("o3", ""), `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv52TokensCost(t, o3, adv52SSE(tc.events), tc.path, tc.body)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the token bucket lost %d, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// An Azure OpenAI deployment is weighed as the model upstreams[].deployments
// maps it to, so a deployment of o3 reasons by default (HiddenReasoning)
// whatever its name: an api-version that streams no usage (stream_options
// came to Azure with 2024-09-01-preview) ends a stream of 3 words that
// billed its reasoning, and is charged the reservation, not 10 tokens.
func TestAdv52AzureReasoningDeploymentStreamWithoutUsage(t *testing.T) {
	events := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	url := startRawUpstream(t, func(c net.Conn) { io.WriteString(c, adv52SSE(events)) })
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: aoai, flavor: azure, base_url: "%s", no_key: true, deployments: {reasoner: o3, chatter: gpt-4o-mini}}
keys:
  - {key: %s, user: alice, tenant: acme}
`, url, testKey) + userTokensLimit("user-tpm", 1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	body := []byte(`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8000,"stream":true}`)
	for _, tc := range []struct {
		deployment  string
		least, most int64
	}{{"reasoner", 8000, 8100}, {"chatter", 9, 20}} {
		before := h.tokensLeft()
		resp, _ := h.send("/openai/deployments/"+tc.deployment+"/chat/completions?api-version=2024-06-01", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", tc.deployment, resp.StatusCode)
		}
		got := before - h.tokensLeft()
		t.Logf("%s: charged %d tokens", tc.deployment, got)
		if got < tc.least || got > tc.most {
			t.Errorf("%s: the token bucket lost %d, want %d to %d", tc.deployment, got, tc.least, tc.most)
		}
	}
}

// A JSON answer to a request whose model may reason unseen, with a usage
// that leaves no token for the reasoning (0 output tokens beside its
// text, as a gateway that zero-fills the figures it lacks sends), was
// charged its visible text (10 tokens for o3) where its stream twin keeps
// the reservation; it now keeps it too. A usage that covers the text is
// the bill (an answer of 2 output tokens), and a model that does not
// reason is charged its text, as before.
func TestAdv52HiddenReasoningAnswerReportingNoOutput(t *testing.T) {
	answer := func(usage string) string {
		a := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":` + usage + `}`
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(a), a)
	}
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8000}`
	}
	for _, tc := range []struct {
		name, model, usage string
		least, most        int64
	}{
		{"o3, 0 output", "o3", `{"prompt_tokens":8,"completion_tokens":0,"total_tokens":8}`, 8000, 8100},
		{"o3, the text's output", "o3", `{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}`, 10, 10},
		{"no reasoning, 0 output", "gpt-4o-mini", `{"prompt_tokens":8,"completion_tokens":0,"total_tokens":8}`, 9, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv52TokensCost(t, "", answer(tc.usage), "/v1/chat/completions", body(tc.model))
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the token bucket lost %d, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}
