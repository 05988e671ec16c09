package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// TestUnreadAnswerReadAsItsParsersRead (tier35): an answer relayed unread
// (over max_response_bytes, or an SSE event over the answer budget) names
// its service tier, type and usage in shapes that the parsers of the
// upstream's SDKs and gateways read as those members: a key written with
// an escape ("service\u005ftier") or in capitals (encoding/json ignores
// case), a Responses type written with one, an
// SSE event whose JSON is spread over several data lines (a client joins
// them with line feeds), a type named twice, a usage named twice. Each was
// charged below its bill: at the tier asked (standard, half priority's
// price for gpt-5), or at the text counted rather than the 6,000 output
// tokens (reasoning included) the usage reports, or at the first usage's
// 9 input tokens rather than the second's 3,000. Through real sockets,
// each is charged what its parsers read: priority's price of the tokens
// settled, at least the usage's figures.
func TestUnreadAnswerReadAsItsParsersRead(t *testing.T) {
	text := strings.Repeat("word ", 3000)
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	chat := func(members string) string {
		return `{"id":"chatcmpl-x","object":"chat.completion","model":"gpt-5",` + members + `,"choices":[{"index":0,"message":{"role":"assistant","content":"` +
			text + `"},"finish_reason":"stop"}]}`
	}
	chunk := func(lines ...string) string { return "data: " + strings.Join(lines, "\ndata: ") + "\n\n" }
	const chatReq = `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}],"max_completion_tokens":1000}`
	const chatStreamReq = `{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"talk"}],"max_completion_tokens":1000}`
	const respReq = `{"model":"gpt-5","stream":true,"input":"talk","max_output_tokens":1000}`
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_x\",\"service_tier\":\"auto\",\"status\":\"in_progress\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + text + "\"}\n\n"
	output := `"output":[{"type":"message","content":[{"type":"output_text","text":"` + text + `"}]}]`
	for _, tc := range []struct {
		name, path, req, body string
		// minOut is the output the charge must reach; minIn the input.
		minOut, minIn float64
	}{
		{name: "chat, tier key escaped", path: "/v1/chat/completions", req: chatReq,
			body: chat(`"service\u005ftier":"priority","usage":` + usage), minOut: 6000},
		{name: "chat, tier key in capitals", path: "/v1/chat/completions", req: chatReq,
			body: chat(`"Service_Tier":"priority","usage":` + usage), minOut: 6000},
		{name: "chat, usage key escaped", path: "/v1/chat/completions", req: chatReq,
			body: chat(`"service_tier":"priority","usag\u0065":` + usage), minOut: 6000},
		{name: "chat, usage named twice", path: "/v1/chat/completions", req: chatReq,
			body: chat(`"service_tier":"priority","usage":` + usage + `,"usage":{"prompt_tokens":3000,"completion_tokens":10,"total_tokens":3010}`), minOut: 6000, minIn: 3000},
		{name: "chat stream unlabelled, usage over data lines", path: "/v1/chat/completions", req: chatStreamReq,
			body: chunk(`{"id":"c","object":"chat.completion.chunk","model":"gpt-5","service_tier":"priority",`, `"choices":[{"index":0,"delta":{"content":"`+text+`"}}]}`) +
				chunk(`{"id":"c","object":"chat.completion.chunk","model":"gpt-5","service_tier":"priority","choices":[],"usage":`, usage+`}`) + "data: [DONE]\n\n",
			minOut: 6000},
		{name: "responses stream unlabelled, type escaped", path: "/v1/responses", req: respReq,
			body:   created + "data: {\"type\":\"response.complete\\u0064\",\"response\":{\"id\":\"resp_x\",\"status\":\"completed\"," + output + ",\"service_tier\":\"priority\"}}\n\n",
			minOut: 1000},
		{name: "responses stream unlabelled, response over data lines", path: "/v1/responses", req: respReq,
			body:   created + chunk(`{"type":"response.completed","response":`, `{"id":"resp_x","status":"completed",`+output+`,"service_tier":"priority"}}`),
			minOut: 1000},
		{name: "responses stream unlabelled, type in the event field alone", path: "/v1/responses", req: respReq,
			body:   created + "event: response.completed\n" + chunk(`{"response":{"id":"resp_x","status":"completed",`+output+`,"service_tier":"priority"}}`),
			minOut: 1000},
		{name: "responses stream unlabelled, the usage of its response", path: "/v1/responses", req: respReq,
			body:   created + chunk(`{"type":"response.completed","response":{"id":"resp_x","status":"completed",`+output+`,"service_tier":"priority","usage":{"input_tokens":9,"output_tokens":9000,"total_tokens":9009}}}`),
			minOut: 9000},
		{name: "responses stream unlabelled, type named twice", path: "/v1/responses", req: respReq,
			body:   created + chunk(`{"type":"response.completed","response":{"id":"resp_x","status":"completed",`+output+`,"service_tier":"priority"},"type":"response.in_progress"}`),
			minOut: 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			h := tier35Harness(t, raw, "max_response_bytes: 4096\n")
			resp, b := h.do(tc.path, tc.req)
			if resp.StatusCode != 200 || len(b) != len(tc.body) {
				t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(tc.body), b)
			}
			chargedAtPriority(t, h, tc.minOut)
			if in := h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"}); in < tc.minIn {
				t.Errorf("charged %v input tokens, want at least %v", in, tc.minIn)
			}
			if n := h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "too_large"}); n != 1 {
				t.Errorf("%v answers relayed unread as too large, want 1: not the path under test", n)
			}
		})
	}
}

// TestUnreadStreamEventReadAsItsParsersRead (tier35): a Responses stream
// labelled text/event-stream whose response.completed (it repeats the
// whole output) is over the answer budget's room is relayed in Truncated
// pieces its stream reader never sees (usageTap's truncated); its JSON
// spread over several data lines — "response": on one line, its object on
// the next — lost the tier: read as JSON, the "data:" between them broke
// the member, and the stream was charged at the tier asked. Through real
// sockets, it is charged at priority's price.
func TestUnreadStreamEventReadAsItsParsersRead(t *testing.T) {
	text := strings.Repeat("word ", 3000)
	long := strings.Repeat("word ", 20000) // 100 KB: over the 64 KiB an event holds without the budget
	for _, tc := range []struct{ name, completed string }{
		{"response over data lines", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":\ndata: {\"id\":\"resp_x\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" +
			long + "\"}]}],\"service_tier\":\"priority\"}}\n\n"},
		{"type over data lines", "event: response.completed\ndata: {\"type\":\ndata: \"response.completed\",\"response\":{\"id\":\"resp_x\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" +
			long + "\"}]}],\"service_tier\":\"priority\"}}\n\n"},
		{"response key escaped", "event: response.completed\ndata: {\"type\":\"response.completed\",\"r\\u0065sponse\":{\"id\":\"resp_x\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" +
			long + "\"}]}],\"service_tier\":\"priority\"}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_x\",\"service_tier\":\"auto\",\"status\":\"in_progress\"}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + text + "\"}\n\n" + tc.completed
			raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			h := tier35Harness(t, raw, "max_inflight_response_bytes: 65536\n")
			resp, b := h.do("/v1/responses", `{"model":"gpt-5","stream":true,"input":"talk","max_output_tokens":1000}`)
			if resp.StatusCode != 200 || len(b) != len(body) {
				t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(body), b)
			}
			chargedAtPriority(t, h, 1000)
		})
	}
}

// tier35Harness is a frozen harness whose upstream answers every request
// with raw, under a daily token limit and the settings extra.
func tier35Harness(t *testing.T, raw, extra string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(baseConfig(t, rawStreamUpstream(t, map[string]string{"": raw}), `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 200000}
`+extra)))
	if err != nil {
		t.Fatal(err)
	}
	return frozenHarness(t, cfg)
}
