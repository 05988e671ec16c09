package weigher

import "testing"

func TestParseUsageFlavors(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		body string
		want Usage
		ok   bool
	}{
		{"responses full", KindResponses, `{"id":"resp_1","object":"response","status":"completed","output":[],
			"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":380}}`,
			Usage{InputTokens: 328, CachedInputTokens: 256, OutputTokens: 52, ReasoningTokens: 30}, true},
		{"responses null usage", KindResponses, `{"id":"resp_1","usage":null}`, Usage{}, false},
		{"responses error body", KindResponses, `{"error":{"message":"bad","type":"invalid_request_error"}}`, Usage{}, false},
		{"messages plain", KindMessages, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],
			"usage":{"input_tokens":25,"output_tokens":12}}`, Usage{InputTokens: 25, OutputTokens: 12}, true},
		// Anthropic's input_tokens excludes both cache fields: all three add
		// up to the whole input.
		{"messages cache fields", KindMessages, `{"usage":{"input_tokens":21,"cache_creation_input_tokens":188086,"cache_read_input_tokens":0,"output_tokens":393,
			"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":188086},"service_tier":"standard"}}`,
			Usage{InputTokens: 21 + 188086, CacheWriteTokens: 188086, CacheWrite1hTokens: 188086, OutputTokens: 393}, true},
		{"messages cache read", KindMessages, `{"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":2000,"output_tokens":5}}`,
			Usage{InputTokens: 2013, CachedInputTokens: 2000, CacheWriteTokens: 10, OutputTokens: 5}, true},
		{"messages null cache fields", KindMessages, `{"usage":{"input_tokens":3,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":5}}`,
			Usage{InputTokens: 3, OutputTokens: 5}, true},
		{"messages negative output is unreadable", KindMessages, `{"usage":{"input_tokens":3,"output_tokens":-5}}`, Usage{}, false},
		{"messages output missing", KindMessages, `{"usage":{"input_tokens":3}}`, Usage{}, false},
		{"responses negative output is unreadable", KindResponses, `{"usage":{"input_tokens":3,"output_tokens":-5}}`, Usage{}, false},
		{"messages error body", KindMessages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Usage{}, false},
		{"count_tokens answer is not usage", KindMessages, `{"input_tokens":14}`, Usage{}, false},
		{"completions", KindCompletions, `{"object":"text_completion","choices":[{"text":"x"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
			Usage{InputTokens: 5, OutputTokens: 7}, true},
		{"embeddings", KindEmbeddings, `{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			Usage{InputTokens: 8}, true},
		{"embeddings without usage", KindEmbeddings, `{"object":"list","data":[]}`, Usage{}, false},
		{"chat", KindChat, `{"usage":{"prompt_tokens":9,"completion_tokens":1}}`, Usage{InputTokens: 9, OutputTokens: 1}, true},
		{"count_tokens kind", KindCountTokens, `{"input_tokens":14}`, Usage{}, false},
		{"other kind", KindOther, `{"usage":{"prompt_tokens":9}}`, Usage{}, false},
		{"garbage", KindMessages, `{"usage":`, Usage{}, false},
	} {
		got, ok := ParseUsage(tc.kind, []byte(tc.body))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ParseUsage = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
