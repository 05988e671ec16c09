package sse

import (
	"bytes"
	"fmt"
	"testing"
)

// openAIStream returns n chat-completion chunks shaped like OpenAI's
// streaming output, a usage-only chunk and the [DONE] sentinel.
func openAIStream(n int) []byte {
	words := []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}
	var b bytes.Buffer
	for k := range n {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-9xKq2ZtY7Lw3","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_2d4670","choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}]}`+"\n\n", words[k%len(words)])
	}
	b.WriteString(`data: {"id":"chatcmpl-9xKq2ZtY7Lw3","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":200,"total_tokens":212}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func benchFeed(b *testing.B, in []byte, chunk int) {
	b.Helper()
	chunks := splitBy(in, []int{chunk})
	var s Scanner
	n, sum := 0, 0
	fn := func(raw []byte, ev Event) {
		n++
		sum += len(ev.Data)
	}
	for _, c := range chunks { // warm the buffers
		s.Feed(c, fn)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Reset()
		for _, c := range chunks {
			s.Feed(c, fn)
		}
	}
	b.ReportMetric(float64(len(chunks)), "feeds/op")
	if n == 0 || sum == 0 {
		b.Fatal("no events")
	}
}

// BenchmarkFeedOpenAI feeds a ~200-event chat stream in 1 KiB reads.
func BenchmarkFeedOpenAI(b *testing.B) {
	benchFeed(b, openAIStream(200), 1024)
}

// BenchmarkFeedOpenAICRLF is the same stream with CRLF line endings.
func BenchmarkFeedOpenAICRLF(b *testing.B) {
	benchFeed(b, bytes.ReplaceAll(openAIStream(200), []byte("\n"), []byte("\r\n")), 1024)
}

// BenchmarkFeedLongLine feeds one 1 MiB data line in 4 KiB reads.
func BenchmarkFeedLongLine(b *testing.B) {
	in := append(append([]byte("data: "), bytes.Repeat([]byte{'x'}, 1<<20)...), "\n\n"...)
	benchFeed(b, in, 4096)
}
