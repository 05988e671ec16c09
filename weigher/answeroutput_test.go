package weigher

import (
	"strings"
	"testing"
)

// AnswerOutputTokens counts an answer's text, and nothing of an answer it
// cannot read unambiguously: too deep, a key twice, not JSON.
func TestAnswerOutputTokens(t *testing.T) {
	w := testWeigher(t)
	text := strings.Repeat("word ", 1000)
	for _, tc := range []struct {
		name string
		kind Kind
		body string
		min  int64 // at least; 0: exactly 0
	}{
		{"chat", KindChat, `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"}}]}`, 1000},
		{"responses", KindResponses, `{"output":[{"type":"message","content":[{"type":"output_text","text":"` + text + `"}]}]}`, 1000},
		{"messages", KindMessages, `{"content":[{"type":"text","text":"` + text + `"}]}`, 1000},
		{"embeddings", KindEmbeddings, `{"data":[{"embedding":[0.1]}]}`, 0},
		{"too deep", KindChat, `{"choices":[{"message":{"content":"` + text + `"}}],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, 0},
		{"key twice", KindChat, `{"choices":[{"message":{"content":"` + text + `","content":"a"}}]}`, 0},
		{"not JSON", KindChat, `{"choices":[{"message":{"content":"` + text + `"}}]`, 0},
	} {
		got := w.AnswerOutputTokens(tc.kind, []byte(tc.body), "gpt-4o-mini")
		if tc.min == 0 && got != 0 || got < tc.min {
			t.Errorf("%s: %d, want %s", tc.name, got, map[bool]string{true: "0", false: "at least 1000"}[tc.min == 0])
		}
	}
}
