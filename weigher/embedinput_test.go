package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestEmbeddingsInputShapes: input objects ({"text": …}, as Jina's and
// OpenRouter's multimodal embeddings take them), strings in inner arrays
// and vLLM's chat-style "messages" weigh their text; an image in an
// object is hidden context.
func TestEmbeddingsInputShapes(t *testing.T) {
	w := testWeigher(t)
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 250)
	plain := w.Embeddings([]byte(`{"model":"text-embedding-3-small","input":["` + text + `"]}`)).InputTokens
	for _, c := range []struct {
		name, body string
		hidden     bool
	}{
		{"object element", `{"model":"text-embedding-3-small","input":[{"text":"` + text + `"}]}`, false},
		{"object input", `{"model":"text-embedding-3-small","input":{"type":"text","text":"` + text + `"}}`, false},
		{"string inner array", `{"model":"text-embedding-3-small","input":[["` + text + `"]]}`, false},
		{"object in inner array", `{"model":"text-embedding-3-small","input":[[{"text":"` + text + `"}]]}`, false},
		{"image beside text", `{"model":"text-embedding-3-small","input":[{"text":"` + text + `"},{"image":"https://example.com/a.png"}]}`, true},
		{"vllm messages", `{"model":"text-embedding-3-small","messages":[{"role":"user","content":"` + text + `"}]}`, false},
	} {
		e := w.Embeddings([]byte(c.body))
		if e.InputTokens < plain || e.ServerContext != c.hidden {
			t.Errorf("%s: %d input tokens (the string %d), ServerContext %v (want %v)", c.name, e.InputTokens, plain, e.ServerContext, c.hidden)
		}
	}
}

// TestEmbeddingsInputSameAsPrompt: on the shapes OpenAI defines,
// embeddingsInputTokens counts what promptTokens counts.
func TestEmbeddingsInputSameAsPrompt(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoder("text-embedding-3-small")
	for _, in := range []string{`"a b c"`, `["a","b c",""]`, `[1,2,3]`, `[[1,2],[3]]`, `["x",[1,2],5]`, `[]`, `null`, `12`, `[true,null]`} {
		p := gjson.Parse(in)
		want, _ := promptTokens(enc, p)
		if got, hidden := embeddingsInputTokens(enc, p); got != want || hidden {
			t.Errorf("%s: %d tokens (hidden %v), promptTokens %d", in, got, hidden, want)
		}
	}
}

// TestCompletionsPromptEmbedsHidden: vLLM's completions "prompt_embeds"
// are prompt tokens the body holds only as tensors: hidden context.
func TestCompletionsPromptEmbedsHidden(t *testing.T) {
	w := testWeigher(t)
	for body, hidden := range map[string]bool{
		`{"model":"meta-llama/Llama-3.1-8B","prompt_embeds":"QUFBQUFBQUFBQUFBQUFBQQ==","max_tokens":16}`: true,
		`{"model":"meta-llama/Llama-3.1-8B","prompt":"hi","prompt_embeds":["QUFBQQ=="],"max_tokens":16}`: true,
		`{"model":"meta-llama/Llama-3.1-8B","prompt":"hi","prompt_embeds":null,"max_tokens":16}`:         false,
	} {
		if e := w.Completions([]byte(body)); e.ServerContext != hidden {
			t.Errorf("%s: ServerContext %v, want %v", body, e.ServerContext, hidden)
		}
	}
}
