package weigher

import (
	"strings"
	"testing"
)

// TestChatReasoningCounted: an assistant message's earlier reasoning —
// OpenRouter's reasoning_details items and reasoning, vLLM's
// reasoning_content — is handed back to the model as input: its text
// weighs at least what the same text weighs as the message's content.
func TestChatReasoningCounted(t *testing.T) {
	w := testWeigher(t)
	thought := strings.Repeat("Let me reconsider the invariant once more and check each branch. ", 400)
	body := func(msg string) []byte {
		return []byte(`{"model":"anthropic/claude-opus-4.6","max_tokens":100,"messages":[{"role":"user","content":"plan it"},` + msg + `,{"role":"user","content":"and now?"}]}`)
	}
	bare := w.Chat(body(`{"role":"assistant","content":"Done."}`)).InputTokens
	asText := w.Chat(body(`{"role":"assistant","content":"Done.` + thought + `"}`)).InputTokens
	for name, msg := range map[string]string{
		"reasoning_details text":      `{"role":"assistant","content":"Done.","reasoning_details":[{"type":"reasoning.text","text":"` + thought + `","signature":"EqQBCgIYAhIM","format":"anthropic-claude-v1","index":0}]}`,
		"reasoning_details summary":   `{"role":"assistant","content":"Done.","reasoning_details":[{"type":"reasoning.summary","summary":"` + thought + `"}]}`,
		"reasoning_details encrypted": `{"role":"assistant","content":"Done.","reasoning_details":[{"type":"reasoning.encrypted","data":"` + strings.Repeat("QUJD", len(thought)/3) + `"}]}`,
		"reasoning":                   `{"role":"assistant","content":"Done.","reasoning":"` + thought + `"}`,
		"reasoning_content":           `{"role":"assistant","content":"Done.","reasoning_content":"` + thought + `"}`,
	} {
		e := w.Chat(body(msg))
		if e.InputTokens < asText {
			t.Errorf("%s: weighed %d input tokens; the same text as content %d, without it %d", name, e.InputTokens, asText, bare)
		}
	}
}
