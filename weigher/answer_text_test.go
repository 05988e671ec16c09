package weigher

import (
	"strings"
	"testing"
)

// A chat answer's visible output (content, parts, refusal, tool calls) and
// a completion's text are read; an answer with none reads "".
func TestAnswerOutputText(t *testing.T) {
	for _, tc := range []struct{ name, body, model, want string }{
		{"content", `{"model":"m","choices":[{"message":{"content":"hello"}}]}`, "m", "hello"},
		{"parts", `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`, "", "a\nb"},
		{"refusal and tools", `{"choices":[{"message":{"content":null,"refusal":"no","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`, "", "no\nf\n{}"},
		{"completions", `{"model":"m","choices":[{"text":"t1"},{"text":"t2"}]}`, "m", "t1\nt2"},
		{"none", `{"choices":[{"message":{"content":""}}]}`, "", ""},
		{"not json", `nope`, "", ""},
	} {
		model, text := answerOutputText([]byte(tc.body))
		if model != tc.model || text != tc.want {
			t.Errorf("%s: (%q, %q), want (%q, %q)", tc.name, model, text, tc.model, tc.want)
		}
	}
}

// A usage of completion_tokens 0 is a valid usage (an answer stopped at
// once), in every spelling of 0; prompt_tokens 0 and a negative
// completion stay unreadable. Weigher.ParseUsage charges the text such an
// answer carries anyway.
func TestChatUsageZeroCompletion(t *testing.T) {
	for _, c := range []string{`0`, `-0`, `0.0`, `"0"`, `" 0 "`, `0e5`} {
		body := `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":` + c + `}}`
		u, ok := ParseChatUsage([]byte(body))
		if !ok || u.InputTokens != 12 || u.OutputTokens != 0 {
			t.Errorf("completion_tokens %s: %+v %v, want 12 in, 0 out", c, u, ok)
		}
		if _, ok := parseChatUsageChecked([]byte(body), 0); !ok {
			t.Errorf("completion_tokens %s: the checked reader refuses it", c)
		}
	}
	for _, body := range []string{
		`{"usage":{"prompt_tokens":0,"completion_tokens":0}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":-1}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":"x"}}`,
		`{"usage":{"prompt_tokens":5}}`,
	} {
		if u, ok := ParseChatUsage([]byte(body)); ok {
			t.Errorf("%s: read as %+v, want unreadable", body, u)
		}
	}
	w := testWeigher(t)
	text := strings.TrimSpace(strings.Repeat("word ", 50))
	body := `{"model":"gpt-4o-mini","choices":[{"message":{"content":"` + text + `"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":12,"completion_tokens":0}}`
	u, ok := w.ParseUsage(KindChat, []byte(body))
	if want := w.CountText("gpt-4o-mini", text); !ok || u.OutputTokens != want || want == 0 {
		t.Errorf("Weigher.ParseUsage: %+v %v, want %d output tokens", u, ok, want)
	}
}

// answerOutputText never panics, and whatever text it returns is made of
// the body's strings (it is never longer than the body).
func FuzzAnswerOutputText(f *testing.F) {
	f.Add([]byte(`{"model":"m","choices":[{"message":{"content":"hello","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`))
	f.Add([]byte(`{"choices":[{"text":"a"},{"delta":{"content":[{"text":"b"}]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"\u00e9\ud800"}}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		model, text := answerOutputText(body)
		if len(model) > len(body) || len(text) > 2*len(body) {
			t.Fatalf("model %d bytes, text %d bytes from a %d-byte body", len(model), len(text), len(body))
		}
	})
}

// answerOutputText is answerOutput's pieces joined by newlines, with the
// answer's model: what TestAnswerOutputText reads.
func answerOutputText(body []byte) (model, text string) {
	var b strings.Builder
	model = answerOutput(body, func(p string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p)
	})
	return model, b.String()
}
