package weigher

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"
)

// CutAnswerUsage counts a body cut short (jsonscan's Truncated) as output
// text, and nothing else: a whole answer (AnswerOutputTokens' part), a body
// that is not JSON, and a kind whose answers carry no text; a usage written
// before the cut gives its input (in, the input wanted) and its output
// when more.
func TestCutAnswerUsage(t *testing.T) {
	w := testWeigher(t)
	text := strings.Repeat("word ", 1000)
	chat := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"}}],"usage":{"prompt_tokens":9,"completion_tokens":1000}}`
	for _, tc := range []struct {
		name     string
		kind     Kind
		body     string
		min, max int64
		in       int64
	}{
		{"chat cut in its usage", KindChat, chat[:len(chat)-20], 1000, 1100, 0},
		{"chat cut in its text", KindChat, chat[:len(chat)/2], 450, 600, 0},
		{"responses cut", KindResponses, `{"output":[{"type":"message","content":[{"type":"output_text","text":"` + text, 1000, 1100, 0},
		{"messages cut", KindMessages, `{"content":[{"type":"text","text":"` + text, 1000, 1100, 0},
		{"whole chat", KindChat, chat, 0, 0, 0},
		{"not JSON", KindChat, `<html>` + text, 0, 0, 0},
		{"syntax error before the end", KindChat, `{"choices":]` + text, 0, 0, 0},
		{"empty", KindChat, ``, 0, 0, 0},
		{"usage first, little text", KindChat, `{"usage":{"prompt_tokens":9,"completion_tokens":5000},"choices":[{"message":{"content":"a few words`, 5000, 5000, 9},
		{"usage first, more text", KindChat, `{"usage":{"prompt_tokens":9,"completion_tokens":5},"choices":[{"message":{"content":"` + text, 1000, 1100, 9},
		{"usage first, large input", KindChat, `{"usage":{"prompt_tokens":50000,"completion_tokens":5},"choices":[{"message":{"content":"a few`, 5, 40, 50000},
		{"messages usage first", KindMessages, `{"usage":{"input_tokens":9,"output_tokens":4000},"content":[{"type":"text","text":"a few`, 4000, 4000, 9},
		{"messages usage first, cache reads", KindMessages, `{"usage":{"input_tokens":9,"cache_read_input_tokens":30000,"output_tokens":4},"content":[{"type":"text","text":"a few`, 4, 40, 30009},
		{"usage cut itself", KindChat, `{"usage":{"prompt_tokens":9,"completion_tokens":5000`, 1, 40, 0},
		{"embeddings cut", KindEmbeddings, `{"data":[{"embedding":"` + text, 0, 0, 0},
	} {
		u := w.CutAnswerUsage(tc.kind, []byte(tc.body), "gpt-4o-mini")
		if got := u.OutputTokens; got < tc.min || got > tc.max {
			t.Errorf("%s: %d output tokens, want %d to %d", tc.name, got, tc.min, tc.max)
		}
		if u.InputTokens != tc.in || u != (Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}) {
			t.Errorf("%s: %+v, want input %d and no other field", tc.name, u, tc.in)
		}
	}
}

// A cut answer that named its service tier before the cut keeps it, so
// that it is charged at the tier served (tier30's readers, on the cut
// path); a name cut short is unread (priced as the dearest tier).
func TestCutAnswerUsageServedTier(t *testing.T) {
	w := testWeigher(t)
	text := strings.Repeat("word ", 1000)
	for _, tc := range []struct{ name, body, tier string }{
		{"responses", `{"model":"gpt-5","service_tier":"priority","output":[{"type":"message","content":[{"type":"output_text","text":"` + text, "priority"},
		{"chat", `{"service_tier":"flex","choices":[{"message":{"content":"` + text, "flex"},
		{"name cut short", `{"choices":[{"message":{"content":"` + text + `"}}],"service_tier":"prio`, spec.TierUnread},
		{"a number", `{"service_tier":7,"choices":[{"message":{"content":"` + text, spec.TierUnread},
		{"none named", `{"choices":[{"message":{"content":"` + text, ""},
	} {
		kind := KindChat
		if tc.name == "responses" {
			kind = KindResponses
		}
		u := w.CutAnswerUsage(kind, []byte(tc.body), "gpt-4o-mini")
		if u.OutputTokens < 1000 || u.ServiceTier != tc.tier {
			t.Errorf("%s: %+v, want 1000+ output tokens served at %q", tc.name, u, tc.tier)
		}
	}
}

// FuzzCutAnswerUsage: any body, never a panic; a count only for a
// truncated one, never below 0 or above maxTokens.
func FuzzCutAnswerUsage(f *testing.F) {
	for _, s := range []string{`{"choices":[{"message":{"content":"hi`, `{"a":1}`, `[`, `{"a":"\u00`, `<p>`, ``, `{"usage":{"prompt_tokens":1,"completion_tokens":9},"x":"`, `{"usage":{"prompt_tokens":1e300,"completion_tokens":-9},"x":"`} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		u := w.CutAnswerUsage(KindChat, body, "gpt-4o-mini")
		n, in := u.OutputTokens, u.InputTokens
		if n < 0 || n > maxTokens || in < 0 || in > maxTokens {
			t.Fatalf("%+v for %d bytes", u, len(body))
		}
		if n+in > 0 && jsonscan.ReasonOf(jsonscan.Check(body, jsonscan.Options{MaxDepth: -1})) != jsonscan.Truncated {
			t.Fatalf("%d tokens for a body that is not cut short: %q", n, body)
		}
	})
}
