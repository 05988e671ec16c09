package weigher

import (
	"fmt"
	"testing"
)

// chatStreamEvents is a realistic streamed chat answer as OpenAI sends one
// with include_usage: a role chunk, 18 content chunks (each with its own
// obfuscation string), a finish chunk, the usage chunk and [DONE].
func chatStreamEvents() [][]byte {
	head := `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":`
	words := []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " It", "\u2019s", " a", " pangram", ":", " \\\"every\\\"", " letter", "!"}
	ev := [][]byte{[]byte(head + `{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"h1"}`)}
	for i, w := range words {
		ev = append(ev, []byte(fmt.Sprintf(`%s{"content":"%s"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"%s"}`, head, w, "q8Zx0pLmN3aB"[:1+i%12])))
	}
	ev = append(ev, []byte(head+`{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"Zk"}`),
		[]byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":18,"total_tokens":37,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"u"}`),
		[]byte("[DONE]"))
	return ev
}

// BenchmarkStreamChatSequence reads one realistic streamed chat answer
// (chatStreamEvents: 22 events) through a new Stream per iteration, as the
// proxy does per response.
func BenchmarkStreamChatSequence(b *testing.B) {
	ev := chatStreamEvents()
	benchStream(b, KindChat, make([][]byte, len(ev)), ev)
}

// BenchmarkStreamChatShared is BenchmarkStreamChatSequence through the
// Weigher's shared chunk shapes, as the proxy's streams read (every
// response after the first reads its role, first content, finish and usage
// chunks on the fast path).
func BenchmarkStreamChatShared(b *testing.B) {
	ev := chatStreamEvents()
	shapes := new(chunkShapes)
	n := 0
	for _, e := range ev {
		n += len(e)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		s := Stream{kind: KindChat, shapes: shapes}
		for i := range ev {
			s.Event(nil, ev[i])
		}
	}
}

// benchStream reads the events data (SSE event names names, nil for none)
// through a new Stream of kind k per iteration, reporting their bytes and
// allocations.
func benchStream(b *testing.B, k Kind, names, data [][]byte) {
	n := 0
	for _, e := range data {
		n += len(e)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		s := NewStream(k)
		for i := range data {
			s.Event(names[i], data[i])
		}
	}
}

// messagesStreamEvents is a realistic streamed Messages answer: message_start,
// a text block of 18 text_delta events, message_delta and message_stop (SSE
// event names as Anthropic sends them).
func messagesStreamEvents() (names, data [][]byte) {
	add := func(n, d string) {
		names = append(names, []byte(n))
		data = append(data, []byte(d))
	}
	add("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`)
	add("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	words := []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " It", "\u2019s", " a", " pangram", ":", " \\\"every\\\"", " letter", "!"}
	for _, w := range words {
		add("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+w+`"}}`)
	}
	add("content_block_stop", `{"type":"content_block_stop","index":0}`)
	add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":18}}`)
	add("message_stop", `{"type":"message_stop"}`)
	return names, data
}

// BenchmarkStreamMessagesSequence reads one realistic streamed Messages
// answer (messagesStreamEvents: 23 events) through a new Stream per
// iteration.
func BenchmarkStreamMessagesSequence(b *testing.B) {
	names, data := messagesStreamEvents()
	benchStream(b, KindMessages, names, data)
}

// responsesStreamEvents is a realistic streamed Responses answer: created,
// in_progress, output item and content part added, 18 output_text.delta
// events (counting sequence numbers, obfuscation strings), the done
// events and response.completed with its usage.
func responsesStreamEvents() (names, data [][]byte) {
	seq := 0
	add := func(typ, rest string) {
		names = append(names, []byte(typ))
		data = append(data, []byte(fmt.Sprintf(`{"type":%q,"sequence_number":%d%s}`, typ, seq, rest)))
		seq++
	}
	add("response.created", `,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"in_progress","model":"gpt-4o-2024-08-06","output":[]}`)
	add("response.in_progress", `,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"in_progress","model":"gpt-4o-2024-08-06","output":[]}`)
	item := `,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0`
	add("response.output_item.added", `,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"in_progress","role":"assistant","content":[]}`)
	add("response.content_part.added", item+`,"part":{"type":"output_text","text":"","annotations":[]}`)
	words := []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " It", "\u2019s", " a", " pangram", ":", " \\\"every\\\"", " letter", "!"}
	for i, w := range words {
		add("response.output_text.delta", item+`,"delta":"`+w+`","logprobs":[],"obfuscation":"`+"q8Zx0pLmN3aB"[:1+i%12]+`"`)
	}
	add("response.output_text.done", item+`,"text":"The quick brown fox jumps over the lazy dog. It\u2019s a pangram: \"every\" letter!","logprobs":[]`)
	add("response.completed", `,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","model":"gpt-4o-2024-08-06","output":[],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":18,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":55}}`)
	return names, data
}

// BenchmarkStreamResponsesSequence reads one realistic streamed Responses
// answer (responsesStreamEvents: 24 events) through a new Stream per
// iteration.
func BenchmarkStreamResponsesSequence(b *testing.B) {
	names, data := responsesStreamEvents()
	benchStream(b, KindResponses, names, data)
}
