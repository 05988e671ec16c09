package weigher

import "testing"

func TestParseChatUsage(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Usage
		ok         bool
	}{
		{"full", `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
			"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0}}}`,
			Usage{InputTokens: 2006, CachedInputTokens: 1920, OutputTokens: 300, ReasoningTokens: 128}, true},
		{"no details", `{"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}`,
			Usage{InputTokens: 19, OutputTokens: 10}, true},
		{"usage first", `{"usage":{"prompt_tokens":3,"completion_tokens":7},"choices":[]}`, Usage{InputTokens: 3, OutputTokens: 7}, true},
		// A usage that would make the call free or cheaper than billed is
		// unreadable: the caller keeps its reservation or local count.
		{"input missing", `{"usage":{"completion_tokens":7},"choices":[]}`, Usage{}, false},
		{"output null", `{"usage":{"prompt_tokens":5,"completion_tokens":null}}`, Usage{}, false},
		{"not numbers", `{"usage":{"prompt_tokens":"nan","completion_tokens":"-inf"}}`, Usage{}, false},
		{"null details", `{"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}}`,
			Usage{InputTokens: 5, OutputTokens: 1}, true},
		{"negative is unreadable", `{"usage":{"prompt_tokens":-5,"completion_tokens":1}}`, Usage{}, false},
		{"numeric strings", `{"usage":{"prompt_tokens":"5","completion_tokens":"1"}}`, Usage{InputTokens: 5, OutputTokens: 1}, true},
		{"no usage", `{"choices":[]}`, Usage{}, false},
		{"null usage", `{"usage":null}`, Usage{}, false},
		{"empty usage", `{"usage":{}}`, Usage{}, false},
		{"error body", `{"error":{"message":"bad","type":"invalid_request_error"}}`, Usage{}, false},
		{"garbage", `not json at all`, Usage{}, false},
		{"empty", ``, Usage{}, false},
	} {
		got, ok := ParseChatUsage([]byte(tc.body))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ParseChatUsage = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseChatChunk(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Chunk
	}{
		{"role delta", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, Chunk{}},
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`, Chunk{Text: "Hello"}},
		{"escaped content", `{"choices":[{"index":0,"delta":{"content":"a\"b\n\u00e9"}}]}`, Chunk{Text: "a\"b\né"}},
		{"content with null usage", `{"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}`, Chunk{Text: "Hi"}},
		{"n=2 choices", `{"choices":[{"index":0,"delta":{"content":"A"}},{"index":1,"delta":{"content":"B"}}]}`, Chunk{Text: "AB"}},
		{"tool call arguments", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`, Chunk{}},
		{"tool call arguments 2", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}},{"index":1,"function":{"arguments":"ation\"}"}}]}}]}`, Chunk{Text: `{"location"}`}},
		{"legacy function_call", `{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{}"}}}]}`, Chunk{Text: "{}"}},
		{"refusal", `{"choices":[{"index":0,"delta":{"refusal":"I can't"}}]}`, Chunk{Text: "I can't"}},
		{"finish", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Chunk{Finished: endsOf(0)}},
		{"usage-only chunk", `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
			Chunk{Usage: Usage{InputTokens: 9, OutputTokens: 12}, HasUsage: true, UsageOnly: true}},
		{"usage with choices", `{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
			Chunk{Usage: Usage{InputTokens: 1, OutputTokens: 2}, HasUsage: true, Text: "x"}},
		{"usage, choices absent", `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
			Chunk{Usage: Usage{InputTokens: 1, OutputTokens: 2}, HasUsage: true}},
		{"done", `[DONE]`, Chunk{Done: true}},
		{"done with spaces", " [DONE]\r\n", Chunk{Done: true}},
		{"error", `{"error":{"message":"The server had an error","type":"server_error"}}`, Chunk{Err: true}},
		{"null error", `{"error":null,"choices":[]}`, Chunk{}},
		{"garbage", `{"choices":[{"delta":{"content":"unterminated`, Chunk{Unread: true}},
		{"not an object", `42`, Chunk{Unread: true}},
		{"usage named twice", `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":1,"completion_tokens":900}}`, Chunk{Unread: true}},
		{"content named twice", `{"choices":[{"delta":{"content":"a","content":"much longer"}}]}`, Chunk{Unread: true}},
		{"blank", " \r\n", Chunk{}},
		{"annotations point into the content", `{"choices":[{"delta":{"content":"see x","annotations":[{"type":"url_citation","url_citation":{"start_index":4,"end_index":5,"url":"https://example.com","title":"x"}}]}}]}`, Chunk{Text: "see x"}},
		{"choices not array", `{"choices":{"delta":{"content":"x"}}}`, Chunk{Uncounted: true}}, // adv40: a choice sent bare, uncounted
		{"empty", ``, Chunk{}},
	} {
		if got := ParseChatChunk([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: ParseChatChunk = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseChatChunkTextDoesNotAliasData(t *testing.T) {
	data := []byte(`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`)
	c := ParseChatChunk(data)
	for i := range data {
		data[i] = 'x'
	}
	if c.Text != "Hello" {
		t.Errorf("Text changed with data: %q", c.Text)
	}
}
