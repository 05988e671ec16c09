package weigher

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chatBody builds a realistic chat request of about size bytes: a system
// prompt, then alternating user/assistant turns of English prose and Go code.
func chatBody(tb testing.TB, size int) []byte {
	tb.Helper()
	prose := "The quick brown fox jumps over the lazy dog while the rate limiter counts every token. " +
		"Budgets reset at the calendar boundary, and a stream the client abandons is charged what it streamed. "
	code := "func (b *Bucket) Take(now time.Time, cost int64) (Decision, error) {\n\tif cost > b.capacity {\n\t\treturn Decision{}, ErrTooLarge\n\t}\n\treturn b.take(now, cost), nil\n}\n"
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model     string `json:"model"`
		Messages  []msg  `json:"messages"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}{Model: "gpt-4o", MaxTokens: 512, Stream: true}
	req.Messages = append(req.Messages, msg{"system", "You are a careful Go reviewer."})
	for i := 0; ; i++ {
		b, err := json.Marshal(req)
		if err != nil {
			tb.Fatal(err)
		}
		if len(b) >= size {
			return b
		}
		role, text := "user", prose
		if i%2 == 1 {
			role, text = "assistant", "Here is a fix:\n"+code
		}
		req.Messages = append(req.Messages, msg{role, fmt.Sprintf("Turn %d. %s", i, text)})
	}
}

func benchmarkChat(b *testing.B, size int) {
	w := testWeigher(b)
	body := chatBody(b, size)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var e Estimate
	for b.Loop() {
		e = w.Chat(body)
	}
	b.ReportMetric(float64(e.InputTokens), "tokens/op")
}

func BenchmarkChat2KB(b *testing.B)  { benchmarkChat(b, 2<<10) }
func BenchmarkChat50KB(b *testing.B) { benchmarkChat(b, 50<<10) }

func BenchmarkChatFallback(b *testing.B) {
	w := testWeigher(b)
	body := []byte(strings.Repeat("not json ", 200))
	b.ReportAllocs()
	for b.Loop() {
		w.Chat(body)
	}
}

func BenchmarkParseChatChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ParseChatChunk(data)
	}
}

func BenchmarkParseChatUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("word ", 400) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920},"completion_tokens_details":{"reasoning_tokens":128}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ParseChatUsage(body)
	}
}

func BenchmarkCountText(b *testing.B) {
	w := testWeigher(b)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		w.CountText("gpt-4o", text)
	}
}

// BenchmarkNew measures start-up: building o200k_base and cl100k_base
// encoders. tiktoken-go caches parsed vocabularies per process, so only the
// first iteration pays the parse; TestNewStartupTime logs the cold figure.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
