package weigher

import "testing"

// servedChatAnswer is the load benchmark's mock chat answer as OpenAI
// writes it: with the service_tier it was served at.
const servedChatAnswer = `{"id":"chatcmpl-mockdnalwivzsdbq","object":"chat.completion","created":1796251185,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" The quick brown fox jumps over the lazy dog. The quick brown fox jumps over","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":16,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_mock"}`

// servedResponsesAnswer is a Responses answer with its service_tier.
const servedResponsesAnswer = `{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","model":"gpt-4o-2024-08-06","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The quick brown fox jumps over the lazy dog.","annotations":[]}]}],"service_tier":"default","usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":18,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":55}}`

// BenchmarkParseServedUsage reads the usage of chat and Responses answers
// that name their service tier (ParseUsage: the proxy's reading of a
// JSON answer), the chat one through the shape fast path after its first.
func BenchmarkParseServedUsage(b *testing.B) {
	for _, c := range []struct {
		name string
		kind Kind
		body string
	}{{"chat", KindChat, servedChatAnswer}, {"responses", KindResponses, servedResponsesAnswer}} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := ParseUsage(c.kind, body); !ok {
					b.Fatal("unreadable")
				}
			}
		})
	}
}
