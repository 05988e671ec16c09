package weigher

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// TestAccuracy is the estimate-accuracy report: on a fixed corpus of
// requests whose token counts the providers publish, it prints the estimate
// next to the published count and checks the bound each flavor promises:
// OpenAI plain text is exact; Claude (no public tokenizer) is never below
// the published count and at most 25% above it.
//
//	go test -run Accuracy -v ./weigher
func TestAccuracy(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	type sample struct {
		source, name string
		estimate     func() int64
		published    int64
		maxOver      float64 // 1 = exact
	}
	chat := func(model, messages, extra string) func() int64 {
		return func() int64 {
			return w.Chat([]byte(fmt.Sprintf(`{"model":%q,"messages":%s,"max_tokens":1%s}`, model, messages, extra))).InputTokens
		}
	}
	messages := func(body string) func() int64 { return func() int64 { return w.Messages([]byte(body)).InputTokens } }
	text := func(model, s string) func() int64 { return func() int64 { return w.CountText(model, s) } }

	const cookbook = "OpenAI cookbook, How to count tokens with tiktoken"
	const anthropic = "Anthropic docs, token counting"
	corpus := []sample{
		{cookbook, "text: tiktoken is great! (cl100k)", text("gpt-4", "tiktoken is great!"), 6, 1},
		{cookbook, "text: お誕生日おめでとう (cl100k)", text("gpt-4", "お誕生日おめでとう"), 9, 1},
		{cookbook, "text: お誕生日おめでとう (o200k)", text("gpt-4o", "お誕生日おめでとう"), 8, 1},
		{cookbook, "chat: example conversation, gpt-3.5-turbo", chat("gpt-3.5-turbo", cookbookMessages, ""), 129, 1},
		{cookbook, "chat: example conversation, gpt-4", chat("gpt-4", cookbookMessages, ""), 129, 1},
		{cookbook, "chat: example conversation, gpt-4o", chat("gpt-4o", cookbookMessages, ""), 124, 1},
		{cookbook, "chat: example conversation, gpt-4o-mini", chat("gpt-4o-mini", cookbookMessages, ""), 124, 1},
		{cookbook, "chat: tools example, gpt-4", chat("gpt-4", cookbookToolMessages, `,"tools":`+cookbookTools), 105, 1},
		{cookbook, "chat: tools example, gpt-4o", chat("gpt-4o", cookbookToolMessages, `,"tools":`+cookbookTools), 101, 1},
		{anthropic, "messages: basic", messages(`{"model":"claude-sonnet-4-5","max_tokens":1,"system":"You are a scientist","messages":[{"role":"user","content":"Hello, Claude"}]}`), 14, 1.25},
		{anthropic, "messages: with a tool", messages(`{"model":"claude-sonnet-4-5","max_tokens":1,"tools":[` + anthropicWeatherTool + `],"messages":[{"role":"user","content":"What's the weather like in San Francisco?"}]}`), 403, 1.25},
		{anthropic, "messages: extended thinking", messages(`{"model":"claude-sonnet-4-5","max_tokens":1,"thinking":{"type":"enabled","budget_tokens":16000},"messages":` + anthropicThinking + `}`), 88, 1.25},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-52s %9s %9s %7s\n", "sample", "published", "estimate", "error")
	exact, total := 0, 0
	for _, s := range corpus {
		got := s.estimate()
		errPct := 100 * float64(got-s.published) / float64(s.published)
		fmt.Fprintf(&b, "%-52s %9d %9d %+6.1f%%\n", s.name, s.published, got, errPct)
		total++
		if got == s.published {
			exact++
		}
		if got < s.published || float64(got) > float64(s.published)*s.maxOver {
			t.Errorf("%s (%s): estimate %d, published %d, allowed [%d, %.0f]", s.name, s.source, got, s.published, s.published, float64(s.published)*s.maxOver)
		}
	}
	fmt.Fprintf(&b, "exact: %d of %d; OpenAI samples must be exact, Claude samples within [0%%, +25%%]\n", exact, total)
	t.Log(b.String())
}
