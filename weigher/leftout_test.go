package weigher

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// A usage whose parts or total show output (or input) its own figure
// leaves out is read with it added: xAI's chat usage counts reasoning
// "separately from completion_tokens, but … in the total_tokens"
// (docs.x.ai, consumption and rate limits), gateways translating Gemini's
// usageMetadata leave thoughtsTokenCount out of completion_tokens. Every
// reader of an OpenAI-shaped usage (the JSON answer's fast scan and its
// checked reader, a streamed chunk, Responses) reads them alike; a usage
// whose figures nest as OpenAI's is read as it is.
func TestUsageLeftOutIsAdded(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		in, out     int64
	}{
		{"openai nests", `{"prompt_tokens":10,"completion_tokens":940,"total_tokens":950,"completion_tokens_details":{"reasoning_tokens":900}}`, 10, 940},
		{"xai reasoning apart", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":950,"completion_tokens_details":{"reasoning_tokens":900}}`, 10, 940},
		{"xai small reasoning", `{"prompt_tokens":10,"completion_tokens":500,"total_tokens":710,"completion_tokens_details":{"reasoning_tokens":200}}`, 10, 700},
		{"gemini zero output", `{"prompt_tokens":21,"completion_tokens":0,"total_tokens":81,"completion_tokens_details":{"reasoning_tokens":60}}`, 21, 60},
		{"reasoning, no total", `{"prompt_tokens":10,"completion_tokens":40,"completion_tokens_details":{"reasoning_tokens":900}}`, 10, 940},
		{"total only", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":"950"}`, 10, 940},
		{"total below the sum", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":20}`, 10, 40},
		{"total not a count", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":-5000}`, 10, 40},
		{"cached apart", `{"prompt_tokens":10,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":5000}}`, 5010, 40},
		{"audio out apart", `{"prompt_tokens":10,"completion_tokens":40,"completion_tokens_details":{"audio_tokens":300}}`, 10, 340},
		{"perplexity deep research", `{"prompt_tokens":108,"completion_tokens":3256,"total_tokens":3364,"citation_tokens":7299,"num_search_queries":74,"reasoning_tokens":73248}`, 108 + 7299, 3256 + 73248},
		{"perplexity strings", `{"prompt_tokens":108,"completion_tokens":3256,"citation_tokens":"7299","reasoning_tokens":"73248"}`, 108 + 7299, 3256 + 73248},
		{"perplexity negative", `{"prompt_tokens":108,"completion_tokens":3256,"citation_tokens":-7299,"reasoning_tokens":null}`, 108, 3256},
		{"litellm cache write apart", `{"prompt_tokens":4,"completion_tokens":40,"total_tokens":44,"cache_creation_input_tokens":20000,"cache_read_input_tokens":0}`, 20004, 40},
		{"litellm cache write within", `{"prompt_tokens":20004,"completion_tokens":40,"total_tokens":20044,"cache_creation_input_tokens":20000,"cache_read_input_tokens":0}`, 20004, 40},
		{"litellm cache write beside a read", `{"prompt_tokens":3004,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":3000},"cache_creation_input_tokens":2000,"cache_read_input_tokens":3000}`, 5004, 40},
		{"absurd total", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":1e300}`, 10, 1e15 - 10},
	} {
		body := []byte(`{"id":"x","choices":[],"usage":` + tc.usage + `}`)
		for name, read := range map[string]func() (Usage, bool){
			"scan":    func() (Usage, bool) { return ParseChatUsage(body) },
			"checked": func() (Usage, bool) { return parseChatUsageChecked(body, 0) },
			"chunk":   func() (Usage, bool) { c := ParseChatChunk(body); return c.Usage, c.HasUsage },
		} {
			u, ok := read()
			if !ok || u.InputTokens != tc.in || u.OutputTokens != tc.out {
				t.Errorf("%s (%s): %+v %v, want input %d, output %d", tc.name, name, u, ok, tc.in, tc.out)
			}
			if strings.Contains(tc.usage, `"cache_creation_input_tokens":`) && u.CacheWriteTokens == 0 {
				t.Errorf("%s (%s): no cache writes in %+v", tc.name, name, u)
			}
			if want := int64(74); strings.Contains(tc.usage, `"num_search_queries":74`) && u.WebSearches != want {
				t.Errorf("%s (%s): %d searches, want %d", tc.name, name, u.WebSearches, want)
			}
		}
	}
	for _, tc := range []struct {
		name, usage string
		out         int64
	}{
		{"nests", `{"input_tokens":10,"output_tokens":940,"output_tokens_details":{"reasoning_tokens":900},"total_tokens":950}`, 940},
		{"reasoning apart", `{"input_tokens":10,"output_tokens":40,"output_tokens_details":{"reasoning_tokens":900}}`, 940},
		{"total apart", `{"input_tokens":10,"output_tokens":40,"total_tokens":950}`, 940},
	} {
		u, ok := ParseResponsesUsage([]byte(`{"id":"r","output":[],"usage":` + tc.usage + `}`))
		if !ok || u.InputTokens != 10 || u.OutputTokens != tc.out {
			t.Errorf("responses %s: %+v %v, want input 10, output %d", tc.name, u, ok, tc.out)
		}
	}
}

// An Anthropic usage whose cache_creation breakdown (ephemeral_5m and
// ephemeral_1h input tokens, which Anthropic documents as the parts of
// cache_creation_input_tokens) sums above cache_creation_input_tokens, or
// comes without it, is read at the breakdown: the writes were billed
// (the 1-hour ones at twice the input price) whatever the total says.
// Before, the breakdown was bounded by the total, and a usage of
// input_tokens 10 with 8,000 tokens written and no total settled 10 input.
func TestMessagesCacheBreakdownIsCharged(t *testing.T) {
	const bd = `"cache_creation":{"ephemeral_5m_input_tokens":3000,"ephemeral_1h_input_tokens":5000}`
	for _, tc := range []struct {
		name, usage             string
		in, write, write1h, out int64
	}{
		{"nests", `{"input_tokens":10,"cache_creation_input_tokens":8000,` + bd + `,"output_tokens":40}`, 8010, 8000, 5000, 40},
		{"no total", `{"input_tokens":10,` + bd + `,"output_tokens":40}`, 8010, 8000, 5000, 40},
		{"total below", `{"input_tokens":10,"cache_creation_input_tokens":100,` + bd + `,"output_tokens":40}`, 8010, 8000, 5000, 40},
		{"total above", `{"input_tokens":10,"cache_creation_input_tokens":9000,` + bd + `,"output_tokens":40}`, 9010, 9000, 5000, 40},
	} {
		u, ok := ParseMessagesUsage([]byte(`{"id":"m","type":"message","content":[],"usage":` + tc.usage + `}`))
		if !ok || u.InputTokens != tc.in || u.CacheWriteTokens != tc.write || u.CacheWrite1hTokens != tc.write1h || u.OutputTokens != tc.out {
			t.Errorf("%s: %+v %v, want input %d (written %d, 1h %d), output %d", tc.name, u, ok, tc.in, tc.write, tc.write1h, tc.out)
		}
		s := NewStream(KindMessages)
		s.Event(nil, []byte(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":`+tc.usage+`}}`))
		s.Event(nil, []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`))
		s.Event(nil, []byte(`{"type":"message_stop"}`))
		if su := s.Usage(); su.Usage.InputTokens != tc.in || su.Usage.CacheWriteTokens != tc.write || su.Usage.CacheWrite1hTokens != tc.write1h {
			t.Errorf("%s stream: %+v, want input %d (written %d, 1h %d)", tc.name, su, tc.in, tc.write, tc.write1h)
		}
	}
}

// Cache writes and fees a usage reports where llmguard did not read them
// are read by every reader that must agree (the JSON answer's fast scan,
// its checked reader, a streamed chunk, and the gjson reference the
// differential tests hold them to; Responses' JSON answer and its
// response.completed event): LiteLLM's prompt_tokens_details
// cache_creation_tokens and its 5-minute and 1-hour breakdown, OpenRouter's
// cache_write_tokens (each priced as plain input before, below the cache
// write price), Perplexity's search_context_size (the size of a request
// fee not charged before), a Responses usage's
// input_tokens_details.cache_write_tokens and its output's
// file_search_call items (billed per call, not charged before).
func TestUsageWritesAndFeesAreRead(t *testing.T) {
	for _, tc := range []struct {
		name, usage        string
		in, write, write1h int64
		size               spec.SearchContextSize
	}{
		{"litellm writes inside", `{"prompt_tokens":20004,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":0,"cache_creation_tokens":20000}}`, 20004, 20000, 0, 0},
		{"litellm 1h breakdown", `{"prompt_tokens":20004,"completion_tokens":40,"prompt_tokens_details":{"cache_creation_tokens":20000,"cache_creation_token_details":{"ephemeral_5m_input_tokens":5000,"ephemeral_1h_input_tokens":15000}}}`, 20004, 20000, 15000, 0},
		{"litellm breakdown above its total", `{"prompt_tokens":20004,"completion_tokens":40,"prompt_tokens_details":{"cache_creation_tokens":100,"cache_creation_token_details":{"ephemeral_5m_input_tokens":5000,"ephemeral_1h_input_tokens":15000}}}`, 20004, 20000, 15000, 0},
		{"litellm writes outside", `{"prompt_tokens":4,"completion_tokens":40,"prompt_tokens_details":{"cache_creation_tokens":20000}}`, 20004, 20000, 0, 0},
		{"litellm both places", `{"prompt_tokens":20004,"completion_tokens":40,"cache_creation_input_tokens":20000,"prompt_tokens_details":{"cache_creation_tokens":20000}}`, 20004, 20000, 0, 0},
		{"openrouter cache_write_tokens", `{"prompt_tokens":194,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":100,"audio_tokens":0}}`, 194, 100, 0, 0},
		{"writes not counts", `{"prompt_tokens":194,"completion_tokens":2,"prompt_tokens_details":{"cache_write_tokens":-100,"cache_creation_tokens":"x","cache_creation_token_details":[1]}}`, 194, 0, 0, 0},
		{"perplexity high", `{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50,"search_context_size":"high"}`, 10, 0, 0, spec.SearchContextHigh},
		{"perplexity low", `{"prompt_tokens":10,"completion_tokens":40,"search_context_size":"low"}`, 10, 0, 0, spec.SearchContextLow},
		{"perplexity unknown size", `{"prompt_tokens":10,"completion_tokens":40,"search_context_size":"pro"}`, 10, 0, 0, spec.SearchContextHigh},
		{"perplexity escaped size", `{"prompt_tokens":10,"completion_tokens":40,"search_context_size":"medi\u0075m"}`, 10, 0, 0, spec.SearchContextMedium},
		{"size not a string", `{"prompt_tokens":10,"completion_tokens":40,"search_context_size":null}`, 10, 0, 0, 0},
	} {
		body := []byte(`{"id":"x","choices":[],"usage":` + tc.usage + `}`)
		for name, read := range map[string]func() (Usage, bool){
			"scan":      func() (Usage, bool) { return ParseChatUsage(body) },
			"checked":   func() (Usage, bool) { return parseChatUsageChecked(body, 0) },
			"chunk":     func() (Usage, bool) { c := ParseChatChunk(body); return c.Usage, c.HasUsage },
			"reference": func() (Usage, bool) { return parseChatUsageGJSON(body, 0) },
		} {
			u, ok := read()
			if !ok || u.InputTokens != tc.in || u.CacheWriteTokens != tc.write || u.CacheWrite1hTokens != tc.write1h || u.SearchContext != tc.size {
				t.Errorf("%s (%s): %+v %v, want input %d, written %d (1h %d), search context %q", tc.name, name, u, ok, tc.in, tc.write, tc.write1h, tc.size)
			}
		}
	}
	const fileCall = `{"type":"file_search_call","id":"fs","status":"completed","queries":["q"]}`
	for _, tc := range []struct {
		name, output, usage string
		in, write, files    int64
	}{
		{"cache_write_tokens", `[]`, `{"input_tokens":20004,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":20000},"output_tokens":40}`, 20004, 20000, 0},
		{"cache_write_tokens outside", `[]`, `{"input_tokens":4,"input_tokens_details":{"cache_write_tokens":20000},"output_tokens":40}`, 20004, 20000, 0},
		{"file search calls", `[` + fileCall + `,{"type":"web_search_call"},` + fileCall + `]`, `{"input_tokens":4,"output_tokens":40}`, 4, 0, 2},
	} {
		resp := `{"id":"r","object":"response","status":"completed","output":` + tc.output + `,"usage":` + tc.usage + `}`
		u, ok := ParseResponsesUsage([]byte(resp))
		s := NewStream(KindResponses)
		s.Event([]byte("response.completed"), []byte(`{"type":"response.completed","response":`+resp+`}`))
		su := s.Usage()
		for name, got := range map[string]Usage{"json": u, "stream": su.Usage} {
			if !ok || !su.Final || got.InputTokens != tc.in || got.CacheWriteTokens != tc.write || got.FileSearches != tc.files {
				t.Errorf("responses %s (%s): %+v, want input %d, written %d, %d file searches", tc.name, name, got, tc.in, tc.write, tc.files)
			}
		}
	}
}
