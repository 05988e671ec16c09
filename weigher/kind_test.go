package weigher

import "testing"

// BenchmarkKindOf classifies the paths the proxy sees most, one of each
// kind and one it does not weigh, with a query and a trailing slash.
func BenchmarkKindOf(b *testing.B) {
	paths := []string{
		"/v1/chat/completions", "/v1/responses/", "/v1/completions?x=1", "/v1/embeddings",
		"/v1/messages", "/v1/messages/count_tokens", "/v1/models",
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range paths {
			KindOf("POST", p)
		}
	}
}

// BenchmarkStreamEventChatChunk is one chat chunk read through
// [Stream.Event], the proxy's path (BenchmarkParseChatChunk reads it
// directly).
func BenchmarkStreamEventChatChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	s := NewStream(KindChat)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s.Event(nil, data)
	}
}
