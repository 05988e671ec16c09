package weigher

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// mockChatAnswer is the chat answer the load benchmark's mock upstream
// gives a warm 1 KiB request (internal/mockllm): usage last, with both
// details objects.
const mockChatAnswer = `{"id":"chatcmpl-mockdnalwivzsdbq","object":"chat.completion","created":1796251185,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":" The quick brown fox jumps over the lazy dog. The quick brown fox jumps over","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":16,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"system_fingerprint":"fp_mock"}`

// answerCases are answers the one-pass reader must read as the checked
// one does: the usage seeds, the mock's answer, other flavors' answers,
// and answers on the edges of what the scan decides (escapes in values
// and keys, whitespace, control characters, many keys, deep nesting,
// duplicates at every depth, figures in every form and place).
func answerCases() []string {
	cases := append([]string{
		mockChatAnswer,
		strings.Replace(mockChatAnswer, `"audio_tokens":0},`, `"audio_tokens":7},`, 1),
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":2,"audio_tokens":1},"completion_tokens_details":{"reasoning_tokens":3,"audio_tokens":2}}}`,
		`{"usage":{"prompt_tokens":20004,"completion_tokens":40,"search_context_size":"high","prompt_tokens_details":{"cache_creation_tokens":20000,"cache_write_tokens":9,"cache_creation_token_details":{"ephemeral_5m_input_tokens":5000,"ephemeral_1h_input_tokens":15000}}}}`,
		`{"usage":{"prompt_tokens":4,"completion_tokens":40,"search_context_size":"medi\u0075m","prompt_tokens_details":{"cache_creation_token_details":{"ephemeral_1h_input_tokens":"15000"}}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"audio_tokens":"4","cached_tokens":2.5}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"completion_tokens_details":{"reasoning_tokens":{"audio_tokens":3}}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":null,"completion_tokens_details":[]}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"extra":{"prompt_tokens_details":{"cached_tokens":2}}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"extra":{"cached_tokens":2,"prompt_tokens":9}}}`,
		`{"usage":{"prompt_tokens":"5","completion_tokens":"6e1"}}`, `{"usage":{"prompt_tokens":-0,"completion_tokens":6}}`,
		`{"usage":{"prompt_tokens":5.00000000001,"completion_tokens":123456789012345678901234567890}}`,
		`{"usage":{"prompt_tokens":true,"completion_tokens":false}}`, `{"usage":{}}`, `{"usage":null}`, `{"usage":5}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"choices":[{"a":1,"a":2}]}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"choices":[{"a":{"b":[{"c":1,"c":1}]}}]}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"choices":[{"a":1},{"a":2}],"x":{"a":1}}`,
		`{"choices":[{"message":{"content":"tab\there \"quoted\" \u00e9 \ud83d\ude00 \\ end"}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		`{"choices":[{"message":{"content":"bad \x escape"}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		"{\"choices\":\"raw\ttab\",\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}",
		"{\"choices\":\"raw \x7f del \xff\xfe bytes\",\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}",
		`{"a\"b":1,"usage":{"prompt_tokens":5,"completion_tokens":6}}`, `{"a":1,"\u0061":2,"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		"\t{ \"usage\" :\n{ \"prompt_tokens\" : 5 ,\r\n \"completion_tokens\" : 6 } }\n ",
		`{"usage":{"prompt_tokens":5,"completion_tokens":6}}{}`, `{"usage":{"prompt_tokens":5,"completion_tokens":6},}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6}]`, `{"usage":{"prompt_tokens":5 "completion_tokens":6}}`,
		`{"usage":{"prompt_tokens":05,"completion_tokens":6}}`, `{"usage":{"prompt_tokens":5.,"completion_tokens":6}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"n":nul}`, `{"usage":{"prompt_tokens":5,"completion_tokens":6},"n":trux}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"n":[1,]}`, `{"usage":{"prompt_tokens":5,"completion_tokens":6},"n":[,1]}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"":1,"":2}`, `{"":{"":{"":{"":[{"":1}]}}}}`,
		`{"output":[{"type":"web_search_call"},{"type":"message"}],"usage":{"input_tokens":3,"output_tokens":4}}`,
		`{"type":"message","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":2}}`,
		`{"data":[{"embedding":[0.1,-2e-3,3E+2]}],"usage":{"prompt_tokens":8,"total_tokens":8}}`,
		`[{"usage":{"prompt_tokens":5,"completion_tokens":6}}]`, `"usage"`, `null`, `12`, ``, ` `, `{`, `}`, `[]`, `{}`,
		answerKeysOpen(20), answerKeysOpen(answerKeys - 1), answerKeysOpen(answerKeys), answerKeysOpen(60), nested(answerDepth - 1), nested(answerDepth), nested(answerDepth + 1), nested(130),
	}, usageSeeds...)
	return cases
}

// answerKeysOpen is a chat answer whose top-level object has n keys besides
// "usage", whose object holds 2 more while it is open.
func answerKeysOpen(n int) string {
	var b strings.Builder
	b.WriteString(`{"usage":{"prompt_tokens":3,"completion_tokens":4}`)
	for i := range n {
		b.WriteString(`,"k` + strings.Repeat("x", i) + `":1`)
	}
	return b.String() + "}"
}

// nested is a chat answer nested d levels deep (d-1 arrays in its
// top-level object).
func nested(d int) string {
	return `{"usage":{"prompt_tokens":3,"completion_tokens":4},"x":` + strings.Repeat(`[`, d-1) + strings.Repeat(`]`, d-1) + `}`
}

// sameAnswer fails t unless the one-pass readers read body as the checked
// ones do (parseChatUsage as parseChatUsageChecked; upstreamMembers as
// upstreamMembersChecked, for chat's and Responses' members) under
// several nesting limits, and unless every answer the scan decides is one
// jsonscan.Check accepts. It reports whether the scan decided at the
// default limit.
func sameAnswer(t *testing.T, body []byte) (decided bool) {
	t.Helper()
	return sameAnswerAt(t, body, answerDepths)
}

// answerDepths are the nesting limits sameAnswer reads each answer under:
// the default, small ones, none, and around answerDepth.
var answerDepths = []int{0, 3, -1, answerDepth - 1, answerDepth, answerDepth + 1, 200}

// sameAnswerAt is sameAnswer under the nesting limits depths (the first
// one 0 for the verdict it reports).
func sameAnswerAt(t *testing.T, body []byte, depths []int) (decided bool) {
	t.Helper()
	for _, depth := range depths {
		got, gok := parseChatUsage(body, depth)
		want, wok := parseChatUsageChecked(body, depth)
		if got != want || gok != wok {
			t.Fatalf("%q (depth %d): %+v %v, checked reader %+v %v", body, depth, got, gok, want, wok)
		}
		for _, m := range [][2]string{{"usage", ""}, {"output", "usage"}} {
			a, b, ok := upstreamMembers(body, depth, m[0], m[1])
			wa, wb, wok := upstreamMembersChecked(body, depth, m[0], m[1])
			if ok != wok || a.Type != wa.Type || a.Raw != wa.Raw || b.Type != wb.Type || b.Raw != wb.Raw {
				t.Fatalf("%q (depth %d, %q): %v %q %q, checked reader %v %q %q", body, depth, m, ok, a.Raw, b.Raw, wok, wa.Raw, wb.Raw)
			}
		}
		s := newAnswerScan("usage", "", true)
		if s.scan(body, depth) {
			if err := jsonscan.Check(body, jsonscan.Options{MaxDepth: depth, DuplicateKeys: true}); err != nil {
				t.Fatalf("%q (depth %d): the scan decided an answer jsonscan refuses: %v", body, depth, err)
			}
			if depth == 0 {
				decided = true
			}
		}
	}
	return decided
}

// TestChatUsageScanSameAsChecked: the one-pass reader gives the checked
// reader's usage, members and verdict on every answer case, each cut
// short at every byte and with each byte replaced by a few others; and
// it decides the ordinary answers (so that the comparison is not only of
// the checked reader with itself) and not the odd ones.
func TestChatUsageScanSameAsChecked(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	decided := 0
	for _, c := range answerCases() {
		if sameAnswer(t, []byte(c)) {
			decided++
		}
		// Each cut and each replaced byte under the default limit and
		// one small one (the whole set of limits is the fuzz test's).
		for n := range len(c) {
			sameAnswerAt(t, []byte(c[:n]), []int{0, 3})
			for _, r := range []byte{'"', '\\', '}', ',', ' ', 0x01} {
				b := []byte(c)
				b[n] = r
				sameAnswerAt(t, b, []int{0})
			}
		}
	}
	if decided < 30 {
		t.Fatalf("the scan decided %d of %d answer cases", decided, len(answerCases()))
	}
	for _, c := range []struct {
		name, body string
		decided    bool
	}{
		{"the mock's answer", mockChatAnswer, true},
		{"escaped value", `{"a":"\u00e9","usage":{"prompt_tokens":1,"completion_tokens":2}}`, true},
		{"escaped key", `{"\u0061":1,"usage":{"prompt_tokens":1,"completion_tokens":2}}`, false},
		{"key twice", `{"usage":{"prompt_tokens":1,"prompt_tokens":2,"completion_tokens":2}}`, false},
		{"answerKeys keys open", answerKeysOpen(answerKeys - 1), true},
		{"too many keys open", answerKeysOpen(answerKeys), false},
		{"answerDepth levels", nested(answerDepth), true},
		{"too deep for the scan", nested(answerDepth + 1), false},
		{"cut short", mockChatAnswer[:100], false},
	} {
		if got := sameAnswer(t, []byte(c.body)); got != c.decided {
			t.Errorf("%s: decided %v, want %v", c.name, got, c.decided)
		}
	}
}

// TestChatUsageScanReads: the one-pass reader's figures for the mock's
// answer and a full one, on their own (the differential test holds it to
// the checked reader; this says what both read).
func TestChatUsageScanReads(t *testing.T) {
	for _, c := range []struct {
		body string
		want Usage
	}{
		{mockChatAnswer, Usage{InputTokens: 19, OutputTokens: 16}},
		{answerCases()[2], Usage{InputTokens: 5, OutputTokens: 6, CachedInputTokens: 2, AudioInputTokens: 1, ReasoningTokens: 3, AudioOutputTokens: 2}},
	} {
		s := newAnswerScan("usage", "", true)
		if !s.scan([]byte(c.body), 0) {
			t.Fatalf("%q: not decided", c.body)
		}
		if got, ok := s.chatUsage([]byte(c.body)); !ok || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.body, got, ok, c.want)
		}
	}
}

// FuzzChatUsageScanSameAsChecked is TestChatUsageScanSameAsChecked on
// any input.
func FuzzChatUsageScanSameAsChecked(f *testing.F) {
	for _, c := range answerCases() {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameAnswer(t, body) })
}

// TestPlainString: the word-at-a-time search stops where a byte loop
// does, for every byte value at every place of a 20-byte string.
func TestPlainString(t *testing.T) {
	stops := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for at := 1; at < 21; at++ {
		for c := range 256 {
			b := []byte(`"` + strings.Repeat("a", 20))
			b[at] = byte(c)
			want := -1
			for i := 1; i < len(b); i++ {
				if stops(b[i]) {
					want = i + 1
					break
				}
			}
			if got := plainString(b, 0); got != want {
				t.Fatalf("byte %#x at %d: %d, want %d", c, at, got, want)
			}
		}
	}
}

// BenchmarkChatUsageRead reads the mock's answer with the one-pass reader
// (parseChatUsage) and with the checked reader it falls back to, for the
// ratio of the two.
func BenchmarkChatUsageRead(b *testing.B) {
	body := []byte(mockChatAnswer)
	for _, c := range []struct {
		name string
		read func([]byte, int) (Usage, bool)
	}{{"scan", parseChatUsage}, {"checked", parseChatUsageChecked}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := c.read(body, 0); !ok {
					b.Fatal("unreadable")
				}
			}
		})
	}
}
