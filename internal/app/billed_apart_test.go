package app

// Usage an upstream bills that llmguard did not charge (bill15): cache
// writes reported where llmguard did not read them, per-request and
// per-call fees the usage reports beside the tokens, and a search count
// the usage ceiling cut. Each case drives llmguard through loopback
// sockets to an upstream answering a canned usage, JSON and streamed,
// and compares the ledger's cost with what the usage bills at the
// model's prices: each failed on the code before the fix, charged less.

import (
	"strings"
	"testing"
)

func TestFeesBesideTheTokensAreCharged(t *testing.T) {
	// claude-sonnet-4-5 at Anthropic's list prices, µUSD per token: input
	// 3, 5-minute cache writes 3.75 (1.25×), 1-hour writes 6 (2×), output
	// 15. sonar-pro: Perplexity's $3 and $15 per million tokens and
	// request fees of $6, $10, $14 per 1,000 (low, medium, high).
	const models = `claude-sonnet-4-5: {input_usd_per_mtok: 3, cache_write_usd_per_mtok: 3.75, cache_write_1h_usd_per_mtok: 6, output_usd_per_mtok: 15}
  sonar-pro: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, search_request_usd_per_k: {low: 6, medium: 10, high: 14}}
  sonar: {input_usd_per_mtok: 1, output_usd_per_mtok: 1}
  sonar-deep-research: {input_usd_per_mtok: 2, output_usd_per_mtok: 8}`
	chat := func(model, usage string) (jsonBody, sseBody string) {
		return `{"id":"c","object":"chat.completion","model":"` + model + `","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":` + usage + `}`,
			`data: {"id":"c","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}` + "\n\n" +
				`data: {"id":"c","choices":[],"usage":` + usage + "}\n\n" + "data: [DONE]\n\n"
	}
	responses := func(output, usage string) (jsonBody, sseBody string) {
		resp := `{"id":"r","object":"response","status":"completed","model":"claude-sonnet-4-5","output":[` + output + `],"usage":` + usage + `}`
		return resp, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"ok\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + resp + "}\n\n"
	}
	const message = `{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}`
	const fileCall = `{"type":"file_search_call","id":"fs","status":"completed","queries":["q"]}`
	for _, tc := range []struct {
		name, model, path string
		jsonBody, sseBody string
		billed            int64 // µUSD, at the prices above
		charged           int64 // µUSD, when not billed: a fee llmguard charges at a dearer price
	}{
		{
			// LiteLLM's newer usage: the writes inside prompt_tokens,
			// reported in prompt_tokens_details, all of them 1-hour: priced
			// as plain input before (60,612).
			name: "litellm cache_creation_tokens", model: "claude-sonnet-4-5", path: "/v1/chat/completions",
			billed: 4*3 + 20000*6 + 40*15,
		},
		{
			// OpenRouter's prompt_tokens_details.cache_write_tokens, 5-minute
			// writes: priced as plain input before (60,612).
			name: "openrouter cache_write_tokens", model: "claude-sonnet-4-5", path: "/v1/chat/completions",
			billed: 4*3 + 20000*15/4 + 40*15,
		},
		{
			// A Responses usage's input_tokens_details.cache_write_tokens
			// (Azure AI Foundry): priced as plain input before (60,612).
			name: "responses cache_write_tokens", model: "claude-sonnet-4-5", path: "/v1/responses",
			billed: 4*3 + 20000*15/4 + 40*15,
		},
		{
			// Two file_search_call items, $2.50 per 1,000 calls: not charged
			// before (612 for the tokens alone).
			name: "responses file search calls", model: "claude-sonnet-4-5", path: "/v1/responses",
			billed: 4*3 + 40*15 + 2*2500,
		},
		{
			// Perplexity's request fee at the size the usage reports: not
			// charged before (630).
			name: "perplexity request fee", model: "sonar-pro", path: "/v1/chat/completions",
			billed: 10*3 + 40*15 + 14_000,
		},
		{
			// A Sonar model whose fee the price table does not give: the
			// dearest search model's at that size, gpt-4o-search-preview's
			// $35 per 1,000 at medium (Sonar bills $8); 50 before.
			name: "perplexity request fee, default", model: "sonar", path: "/v1/chat/completions",
			billed: 10 + 40 + 8_000, charged: 10 + 40 + 35_000,
		},
		{
			// Deep research's 74 search queries, $5 per 1,000, charged at
			// the $10 llmguard charges every search: the usage ceiling held
			// them to 10 before (100,536 µUSD for 370,536 billed).
			name: "deep research searches above ten", model: "sonar-deep-research", path: "/v1/chat/completions",
			billed: 108*2 + 40*8 + 74*5_000, charged: 108*2 + 40*8 + 74*10_000,
		},
	} {
		switch tc.name {
		case "litellm cache_creation_tokens":
			tc.jsonBody, tc.sseBody = chat(tc.model, `{"prompt_tokens":20004,"completion_tokens":40,"total_tokens":20044,"prompt_tokens_details":{"cached_tokens":0,"cache_creation_tokens":20000,"cache_creation_token_details":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":20000}}}`)
		case "openrouter cache_write_tokens":
			tc.jsonBody, tc.sseBody = chat(tc.model, `{"prompt_tokens":20004,"completion_tokens":40,"total_tokens":20044,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":20000,"audio_tokens":0},"cost":0.0756}`)
		case "responses cache_write_tokens":
			tc.jsonBody, tc.sseBody = responses(message, `{"input_tokens":20004,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":20000},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":20044}`)
		case "responses file search calls":
			tc.jsonBody, tc.sseBody = responses(fileCall+","+fileCall+","+message, `{"input_tokens":4,"output_tokens":40,"total_tokens":44}`)
		case "perplexity request fee":
			tc.jsonBody, tc.sseBody = chat(tc.model, `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50,"search_context_size":"high"}`)
		case "perplexity request fee, default":
			tc.jsonBody, tc.sseBody = chat(tc.model, `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50,"search_context_size":"medium"}`)
		case "deep research searches above ten":
			tc.jsonBody, tc.sseBody = chat(tc.model, `{"prompt_tokens":108,"completion_tokens":40,"total_tokens":148,"num_search_queries":74}`)
		}
		srv := cannedChatUpstream(t, tc.jsonBody, tc.sseBody)
		h, file := startSearchRig(t, "openai", srv.URL, models, "100")
		for _, stream := range []string{``, `"stream":true,`} {
			body := `{"model":"` + tc.model + `",` + stream + `"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
			if tc.path == "/v1/responses" {
				body = `{"model":"` + tc.model + `",` + stream + `"max_output_tokens":100,"input":"hi"}`
			} else if stream != "" {
				body = strings.Replace(body, `"stream":true,`, `"stream":true,"stream_options":{"include_usage":true},`, 1)
			}
			resp, got := h.do(tc.path, body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s (stream %v): %d %.300s", tc.name, stream != "", resp.StatusCode, got)
			}
		}
		recs := flushedRecords(t, h, file)
		if len(recs) != 2 {
			t.Fatalf("%s: ledger %+v", tc.name, recs)
		}
		want := max(tc.charged, tc.billed)
		for i, r := range recs {
			if r.CostMicroUSD < tc.billed || r.CostMicroUSD != want {
				t.Errorf("%s (%s): charged %d µUSD for %d billed, want %d", tc.name, []string{"json", "stream"}[i], r.CostMicroUSD, tc.billed, want)
			}
		}
	}
}
