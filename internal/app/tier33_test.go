package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// TestUnreadAnswerChargedAtTheServedTier: an answer relayed unread (over
// max_response_bytes here; the same path as one that finds no room in
// max_inflight_response_bytes) is counted as it passes, its top-level
// usage read; its service_tier was not, so an answer served at priority to
// a gpt-5 request that asked for no tier was charged the standard price,
// half its bill, by any caller who filled the answer memory first. It is
// read in passing too: a chat completion's (with a usage or without one),
// each chunk's of a stream its upstream did not label text/event-stream,
// and a Responses stream's terminal event's response.service_tier (its
// response.created naming "auto", the tier asked). Each charged at
// priority's price of the tokens it settled.
func TestUnreadAnswerChargedAtTheServedTier(t *testing.T) {
	text := strings.Repeat("word ", 3000)
	chunk := func(content string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-5","service_tier":"priority","choices":[{"index":0,"delta":{"content":"` + content + `"}}]}` + "\n\n"
	}
	for _, tc := range []struct {
		name, path, req, body string
	}{
		{"chat with a usage", "/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}],"max_completion_tokens":1000}`,
			`{"id":"chatcmpl-x","object":"chat.completion","model":"gpt-5","service_tier":"priority","choices":[{"index":0,"message":{"role":"assistant","content":"` +
				text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3001,"total_tokens":3010}}`},
		{"chat without a usage", "/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}],"max_completion_tokens":1000}`,
			`{"id":"chatcmpl-x","object":"chat.completion","model":"gpt-5","service_tier":"priority","choices":[{"index":0,"message":{"role":"assistant","content":"` +
				text + `"},"finish_reason":"stop"}]}`},
		{"chat stream unlabelled", "/v1/chat/completions", `{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"talk"}],"max_completion_tokens":1000}`,
			chunk(text[:len(text)/2]) + chunk(text[len(text)/2:]) + "data: [DONE]\n\n"},
		{"responses stream unlabelled", "/v1/responses", `{"model":"gpt-5","stream":true,"input":"talk","max_output_tokens":1000}`,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_x\",\"service_tier\":\"auto\",\"status\":\"in_progress\"}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + text + "\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_x\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" +
				text + "\"}]}],\"service_tier\":\"priority\"}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			cfg, err := config.Parse([]byte(baseConfig(t, rawStreamUpstream(t, map[string]string{"": raw}), `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
max_response_bytes: 4096
`)))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			resp, b := h.do(tc.path, tc.req)
			if resp.StatusCode != 200 || len(b) != len(tc.body) {
				t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(tc.body), b)
			}
			chargedAtPriority(t, h, 1000)
			if n := h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "too_large"}); n != 1 {
				t.Errorf("%v answers relayed unread as too large, want 1: not the path under test", n)
			}
		})
	}
}
