package app

// Adversarial tests of adv49 (2026-12-07): a gateway's own bill read
// where adv47 left it unread (LiteLLM's cost header; OpenRouter's cost in
// Responses and Messages usages), and new holes. Each drives llmguard
// through loopback sockets to an upstream the test sets.

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// adv49USDCost is what alice's dollar bucket (user-usd, $100) lost, in
// micro-USD, for one call of body to path whose upstream answers status
// with answer (contentType) and the extra header lines fields (each
// ending "\r\n").
func adv49USDCost(t *testing.T, status int, fields, contentType, answer, path, body string) int64 {
	t.Helper()
	url := startRawUpstream(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n\r\n%s", status, contentType, fields, len(answer), answer)
	})
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + "limits:\n" + usdLimit + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := rateLimitRemaining(t, h.probe(), "user-usd")
	var headers []string
	if strings.HasPrefix(path, "/v1/messages") {
		headers = []string{"anthropic-version", "2023-06-01"}
	}
	resp, _ := h.do(path, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	return left - rateLimitRemaining(t, h.probe(), "user-usd")
}

// A LiteLLM proxy prices each call at the deployment it routed to, which
// its tag routing (a request's "tags", metadata.tags or x-litellm-tags)
// picks among deployments of one model group that may be different
// models, and reports it in the x-litellm-response-cost header (USD,
// https://docs.litellm.ai/docs/proxy/response_headers). llmguard priced
// the group's name at the table's price: a call LiteLLM billed $0.25 cost
// the budget 5 µUSD. It is now charged the larger of the two, whatever
// the answer (usage or none, JSON or stream, an error status), and a
// header that is no positive number (NaN, negative, junk, 65 bytes and
// more) is the table's price; an infinite one the most a figure is read
// as.
func TestAdv49LiteLLMCostHeaderIsCharged(t *testing.T) {
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"tags":["dear"]}`
	const streamBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true,"metadata":{"tags":["dear"]}}`
	const answer = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}}`
	const noUsage = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}]}`
	const stream = `data: {"id":"c-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there, friend."},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}}` + "\n\ndata: [DONE]\n\n"
	const errorBody = `{"error":{"message":"upstream failed","type":"server_error"}}`
	// gpt-4o-mini at the table's price: 8 input tokens at 0.15 and 5
	// output at 0.60 USD a million, 5 µUSD (rounded up).
	const table = (8*150_000 + 5*600_000 + 999_999) / 1_000_000
	for _, tc := range []struct {
		name        string
		status      int
		fields      string
		stream      bool
		answer      string
		least, most int64 // micro-USD the bucket must lose
	}{
		{"JSON", 200, "x-litellm-response-cost: 0.25\r\n", false, answer, 250_000, 250_000},
		{"JSON, the name in another case", 200, "X-LiteLLM-Response-Cost: 0.25\r\n", false, answer, 250_000, 250_000},
		{"JSON, an exponent", 200, "x-litellm-response-cost: 1.5e-05\r\n", false, answer, 15, 15},
		{"JSON, two fields: the larger", 200, "x-litellm-response-cost: 0.000001\r\nx-litellm-response-cost: 0.25\r\n", false, answer, 250_000, 250_000},
		{"stream", 200, "x-litellm-response-cost: 0.25\r\n", true, stream, 250_000, 250_000},
		{"JSON without usage: above the reservation", 200, "x-litellm-response-cost: 0.25\r\n", false, noUsage, 250_000, 250_000},
		{"an error status: what it says it billed", 500, "x-litellm-response-cost: 0.25\r\n", false, errorBody, 250_000, 250_000},
		{"an infinite cost: the whole budget", 200, "x-litellm-response-cost: inf\r\n", false, answer, 99_000_000, 100_000_000},
		// Below the table's price, or no positive number: the table's.
		{"JSON, a cheap deployment", 200, "x-litellm-response-cost: 0.000001\r\n", false, answer, table, table},
		{"JSON, NaN", 200, "x-litellm-response-cost: NaN\r\n", false, answer, table, table},
		{"JSON, negative", 200, "x-litellm-response-cost: -5\r\n", false, answer, table, table},
		{"JSON, junk", 200, "x-litellm-response-cost: 0.25USD\r\n", false, answer, table, table},
		{"JSON, 65 bytes", 200, "x-litellm-response-cost: 0." + strings.Repeat("0", 61) + "25\r\n", false, answer, table, table},
		{"an error status without a cost: refunded", 500, "x-litellm-response-cost: 0\r\n", false, errorBody, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := "application/json", chatBody
			if tc.stream {
				ct, body = "text/event-stream", streamBody
			}
			got := adv49USDCost(t, tc.status, tc.fields, ct, tc.answer, "/v1/chat/completions", body)
			t.Logf("charged %d µUSD", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the dollar bucket lost %d µUSD, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// OpenRouter's Responses API (usage: input_tokens, output_tokens…, and
// cost, is_byok, cost_details as in its chat usage:
// https://openrouter.ai/docs/agent-sdk/typescript/models/openresponsesusage)
// and its Anthropic Messages API report what it billed in the usage too;
// adv47 read it from chat usages alone, so a Responses or Messages call
// routed to a dearer provider cost the table's price. Each is now charged
// the larger, JSON and stream.
func TestAdv49OpenRouterCostInResponsesAndMessages(t *testing.T) {
	const respBody = `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"provider":{"order":["dear"]}}`
	const respStreamBody = `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"stream":true,"provider":{"order":["dear"]}}`
	const msgBody = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	const msgStreamBody = `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	respJSON := func(usage string) string {
		return `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello there, friend."}]}],"usage":` + usage + `}`
	}
	respStream := func(usage string) string {
		return "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello there, friend.\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + respJSON(usage) + "}\n\n"
	}
	msgJSON := func(usage string) string {
		return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello there, friend."}],"stop_reason":"end_turn","usage":` + usage + `}`
	}
	msgStream := func(usage string) string {
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, friend.\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":" + usage + "}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	const respUsage = `{"input_tokens":8,"output_tokens":5,"total_tokens":13,"cost":0.25,"is_byok":false,"cost_details":{"upstream_inference_cost":null}}`
	const respByok = `{"input_tokens":8,"output_tokens":5,"total_tokens":13,"cost":0.0125,"is_byok":true,"cost_details":{"upstream_inference_cost":0.25}}`
	const msgUsage = `{"input_tokens":8,"output_tokens":5,"cost":0.25}`
	const msgDelta = `{"output_tokens":5,"cost":0.25}`
	// gpt-4o-mini at the table's price, 5 µUSD; claude-sonnet-4-5 at $3
	// and $15 a million, 8×3 + 5×15 = 99 µUSD.
	const gptTable, claudeTable = 5, 99
	for _, tc := range []struct {
		name, path, body, ct, answer string
		least, most                  int64
	}{
		{"Responses JSON", "/v1/responses", respBody, "application/json", respJSON(respUsage), 250_000, 250_000},
		{"Responses JSON, BYOK", "/v1/responses", respBody, "application/json", respJSON(respByok), 262_500, 262_500},
		{"Responses stream", "/v1/responses", respStreamBody, "text/event-stream", respStream(respUsage), 250_000, 250_000},
		{"Messages JSON", "/v1/messages", msgBody, "application/json", msgJSON(msgUsage), 250_000, 250_000},
		{"Messages stream", "/v1/messages", msgStreamBody, "text/event-stream", msgStream(msgDelta), 250_000, 250_000},
		// No cost, or a cheap one: the table's price, as before.
		{"Responses JSON, no cost", "/v1/responses", respBody, "application/json", respJSON(`{"input_tokens":8,"output_tokens":5,"total_tokens":13}`), gptTable, gptTable},
		{"Messages JSON, a cheap cost", "/v1/messages", msgBody, "application/json", msgJSON(`{"input_tokens":8,"output_tokens":5,"cost":0.000001}`), claudeTable, claudeTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv49USDCost(t, 200, "", tc.ct, tc.answer, tc.path, tc.body)
			t.Logf("charged %d µUSD", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the dollar bucket lost %d µUSD, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}
