package jsonscan

import (
	"strconv"
	"strings"
	"testing"
)

// mockAnswer is the chat completion the benchmark's mock upstream
// (internal/mockllm) answers a warm 1 KiB request with: 594 bytes, its
// usage object last with two details objects.
const mockAnswer = `{"id":"chatcmpl-mockdnalwivzsdbq","object":"chat.completion","created":1796251185,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" The quick brown fox jumps over the lazy dog. The quick brown fox jumps over","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":16,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"system_fingerprint":"fp_mock"}`

// chatBody is a chat completions request of about n bytes shaped as the
// load benchmark's (internal/loadbench): a system prompt, user and
// assistant turns of prose, one tool call with escaped JSON arguments and
// its result, and two function tools with JSON-schema parameters.
func chatBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."}`)
	prose := "The quick brown fox jumps over the lazy dog, and then it rests a while. "
	for i := 0; b.Len() < n-600; i++ {
		switch i % 3 {
		case 0:
			b.WriteString(`,{"role":"user","content":"` + strconv.Itoa(i) + ` ` + strings.Repeat(prose, 1+i%3) + `"}`)
		case 1:
			b.WriteString(`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_` + strconv.Itoa(i) + `","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"fox \\u00e9 dog\", \"top_k\": 3}"}}]}`)
			b.WriteString(`,{"role":"tool","tool_call_id":"call_` + strconv.Itoa(i) + `","content":"{\"hits\": [{\"id\": 1, \"score\": 0.93}]}"}`)
		default:
			b.WriteString(`,{"role":"assistant","content":"Sure: ` + strings.Repeat(prose, 1+i%2) + `"}`)
		}
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"search_docs","description":"Search the docs.","parameters":{"type":"object","properties":{"query":{"type":"string"},"top_k":{"type":"integer","minimum":1}},"required":["query"]}}},` +
		`{"type":"function","function":{"name":"get_weather","description":"Weather now.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"max_tokens":256,"temperature":0.7}`)
	return []byte(b.String())
}

// BenchmarkLean is Check as the request path runs it: on the mock's chat
// answer as upstreamMembers checks it (duplicate keys, layout), and on 1
// KiB and 16 KiB request bodies as parseRequest checks them (case-folded
// keys, UTF-8, layout).
func BenchmarkLean(b *testing.B) {
	var lay Layout
	for _, c := range []struct {
		name string
		body []byte
		opt  Options
	}{
		{"answer", []byte(mockAnswer), Options{DuplicateKeys: true, Layout: &lay}},
		{"request-1k", chatBody(1 << 10), Options{FoldCase: true, UTF8: true, Layout: &lay}},
		{"request-16k", chatBody(16 << 10), Options{FoldCase: true, UTF8: true, Layout: &lay}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Check(c.body, c.opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
