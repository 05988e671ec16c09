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
		// An input the answer does not report as a positive count is not
		// taken as a free call: the caller keeps its reservation.
		{"embeddings zero prompt_tokens", KindEmbeddings, `{"data":[],"usage":{"prompt_tokens":0,"total_tokens":0}}`, Usage{}, false},
		{"embeddings negative prompt_tokens", KindEmbeddings, `{"data":[],"usage":{"prompt_tokens":-50,"total_tokens":-50}}`, Usage{}, false},
		{"embeddings prompt_tokens not a number", KindEmbeddings, `{"data":[],"usage":{"prompt_tokens":"many","total_tokens":7}}`, Usage{}, false},
		{"embeddings prompt_tokens a numeric string", KindEmbeddings, `{"data":[],"usage":{"prompt_tokens":" 12 ","total_tokens":12}}`, Usage{InputTokens: 12}, true},
		{"embeddings huge prompt_tokens", KindEmbeddings, `{"data":[],"usage":{"prompt_tokens":1e30}}`, Usage{InputTokens: maxTokens}, true},
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

// FuzzParseUsageReportsInput: whatever an upstream answers, a usage
// ParseUsage reads (ok) reports a positive input and no negative figure, so
// that an answer can never settle a weighed request's input at 0 (a missing,
// zero, negative or unreadable input keeps the reservation instead).
func FuzzParseUsageReportsInput(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"prompt_tokens":9,"completion_tokens":1}}`,
		`{"data":[],"usage":{"prompt_tokens":0,"total_tokens":0}}`,
		`{"data":[],"usage":{"prompt_tokens":-50}}`,
		`{"usage":{"prompt_tokens":"12"}}`,
		`{"usage":{"input_tokens":3,"output_tokens":5,"input_tokens_details":{"cached_tokens":-1}}}`,
		`{"usage":{"input_tokens":0,"cache_read_input_tokens":2000,"output_tokens":5}}`,
		`{"usage":{"input_tokens":-3,"output_tokens":5}}`,
		`{"output":[{"type":"file_search_call"}],"usage":{"input_tokens":4,"output_tokens":5,"input_tokens_details":{"cache_write_tokens":20000}}}`,
		`{"usage":{"prompt_tokens":1e400,"completion_tokens":1}}`,
	} {
		for k := KindOther; k < numKinds; k++ {
			f.Add(uint8(k), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		k := Kind(kind % uint8(numKinds))
		u, ok := ParseUsage(k, body)
		if !ok {
			if u != (Usage{}) {
				t.Errorf("%v: unreadable usage with figures %+v", k, u)
			}
			return
		}
		if u.InputTokens <= 0 {
			t.Errorf("%v: a usage read with input %d: %q", k, u.InputTokens, body)
		}
		if u.CachedInputTokens < 0 || u.CacheWriteTokens < 0 || u.OutputTokens < 0 || u.ReasoningTokens < 0 || u.AudioInputTokens < 0 || u.AudioOutputTokens < 0 {
			t.Errorf("%v: negative figure %+v", k, u)
		}
	})
}

// FuzzMessagesStreamFinalReportsBoth: a Messages stream (message_start,
// a text delta, message_delta, message_stop) whose two usage objects are
// anything is final only when both its input and its output were reported,
// and settles its input at the estimate's otherwise.
func FuzzMessagesStreamFinalReportsBoth(f *testing.F) {
	f.Add([]byte(`{"input_tokens":3,"output_tokens":1}`), []byte(`{"output_tokens":7}`))
	f.Add([]byte(`{"output_tokens":1}`), []byte(`{"output_tokens":7}`))
	f.Add([]byte(`{"input_tokens":"3","output_tokens":1}`), []byte(`{"output_tokens":7}`))
	f.Add([]byte(`{"input_tokens":-3}`), []byte(`{"input_tokens":0,"output_tokens":7}`))
	f.Add([]byte(`{"cache_read_input_tokens":30}`), []byte(`{"output_tokens":7,"cache_creation_input_tokens":1}`))
	f.Add([]byte(`null`), []byte(`{"output_tokens":1e400}`))
	f.Fuzz(func(t *testing.T, start, delta []byte) {
		s := NewStream(KindMessages)
		s.Event([]byte("message_start"), []byte(`{"type":"message_start","message":{"usage":`+string(start)+`}}`))
		s.Event([]byte("content_block_delta"), []byte(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"a b"}}`))
		s.Event([]byte("message_delta"), []byte(`{"type":"message_delta","usage":`+string(delta)+`}`))
		s.Event([]byte("message_stop"), []byte(`{"type":"message_stop"}`))
		r := s.Usage()
		if r.Final && (!r.Input || !r.Output) {
			t.Errorf("final without both figures: %+v", r)
		}
		est := Estimate{InputTokens: 4000, OutputTokens: 50}
		u, src := s.Settle(est, 2)
		if !r.Input && u.InputTokens != est.InputTokens {
			t.Errorf("input unreported, settled at %d (%v), want the estimate's %d", u.InputTokens, src, est.InputTokens)
		}
		if r.Input && u.InputTokens <= 0 {
			t.Errorf("input reported, settled at %d", u.InputTokens)
		}
	})
}
