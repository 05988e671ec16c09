package weigher

import (
	"encoding/json"
	"fmt"
	"github.com/tidwall/gjson"
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
	w := uncached(b)
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

// benchChatChunk is a chat completion chunk as OpenAI streams one per
// token (https://platform.openai.com/docs/api-reference/chat-streaming).
const benchChatChunk = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`

func BenchmarkParseChatChunk(b *testing.B) {
	data := []byte(benchChatChunk)
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

// BenchmarkParseChatUsageMock reads the usage of the chat answer the load
// benchmark's mock upstream gives a warm 1 KiB request (594 bytes, usage
// last with both details objects).
func BenchmarkParseChatUsageMock(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-mockdnalwivzsdbq","object":"chat.completion","created":1796251185,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" The quick brown fox jumps over the lazy dog. The quick brown fox jumps over","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":16,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"system_fingerprint":"fp_mock"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseChatUsage(body); !ok {
			b.Fatal("unreadable")
		}
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
// first iteration pays the parse (the cold figure, to ready, is in the
// README's Benchmarks table).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// messagesBody is a realistic Messages request of about size bytes: a
// system prompt, a tool, alternating turns of prose and Go code.
func messagesBody(tb testing.TB, size int) []byte {
	tb.Helper()
	chat := chatBody(tb, size)
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(chat, &req); err != nil {
		tb.Fatal(err)
	}
	msgs, _ := json.Marshal(req.Messages[1:])
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"system":[{"type":"text","text":"You are a careful Go reviewer.","cache_control":{"type":"ephemeral"}}],"tools":[` +
		anthropicWeatherTool + `],"messages":` + string(msgs) + `}`)
}

// responsesBody is the same conversation as a Responses request.
func responsesBody(tb testing.TB, size int) []byte {
	tb.Helper()
	b := messagesBody(tb, size)
	i := strings.Index(string(b), `"messages":`)
	return []byte(`{"model":"gpt-4o","instructions":"You are a careful Go reviewer.","max_output_tokens":1024,"stream":true,"tools":[{"type":"function","name":"get_weather","description":"Get the current weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}],"input":` +
		string(b[i+len(`"messages":`):]))
}

func BenchmarkMessages2KB(b *testing.B) {
	w := uncached(b)
	body := messagesBody(b, 2<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var e Estimate
	for b.Loop() {
		e = w.Messages(body)
	}
	b.ReportMetric(float64(e.InputTokens), "tokens/op")
}

func BenchmarkResponses2KB(b *testing.B) {
	w := uncached(b)
	body := responsesBody(b, 2<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var e Estimate
	for b.Loop() {
		e = w.Responses(body)
	}
	b.ReportMetric(float64(e.InputTokens), "tokens/op")
}

func BenchmarkStreamEventMessagesDelta(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`)
	typ := []byte("content_block_delta")
	s := NewStream(KindMessages)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s.Event(typ, data)
	}
}

func BenchmarkStreamEventResponsesDelta(b *testing.B) {
	data := []byte(`{"type":"response.output_text.delta","item_id":"msg_123","output_index":0,"content_index":0,"delta":" world","sequence_number":12}`)
	typ := []byte("response.output_text.delta")
	s := NewStream(KindResponses)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s.Event(typ, data)
	}
}

// BenchmarkAdmission is what the proxy does to a 2 KB chat body before the
// take: the duplicate-key check and the estimate.
func BenchmarkAdmission(b *testing.B) {
	w := uncached(b)
	body := chatBody(b, 2<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if e := w.Weigh(KindChat, body); e.DuplicateKeys || !e.Parsed {
			b.Fatal("unexpected estimate")
		}
	}
}

// BenchmarkParseMessagesUsage reads an Anthropic answer of some 2 KB whose
// usage comes last: "layout" as ParseMessagesUsage reads it (the member
// found in the checking pass's layout), "reference" as it read it before
// (the check, then gjson's Get of "usage", a second scan of the answer).
func BenchmarkParseMessagesUsage(b *testing.B) {
	body := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` +
		strings.Repeat("word ", 400) + `"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":2006,"cache_creation_input_tokens":0,"cache_read_input_tokens":1920,"output_tokens":300}}`)
	b.Run("layout", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			ParseMessagesUsage(body)
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			s, ok := upstreamDoc(body, 0)
			if ok {
				var a anthropicUsage
				a.merge(gjson.Get(s, "usage"))
			}
		}
	})
}
