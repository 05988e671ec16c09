package weigher

import (
	"strings"
	"testing"
)

// An embeddings body carrying its text under "texts", "inputs" or "prompt"
// (Cohere-style servers, Text Embeddings Inference, Ollama's older API),
// which a lenient upstream embeds and bills, is weighed as if that text
// were "input"; with "input" beside it, both are weighed. Before, such a
// body weighed 0 input tokens.
func TestEmbeddingsAltInputsWeighed(t *testing.T) {
	w := testWeigher(t)
	words := strings.TrimSpace(strings.Repeat("word ", 300)) // 300 tokens
	base := w.Embeddings([]byte(`{"model":"text-embedding-3-small","input":"` + words + `"}`)).InputTokens
	if base < 300 {
		t.Fatalf("input weighs %d, want at least 300", base)
	}
	for _, field := range embeddingsAltInputs {
		for _, shape := range []string{`"` + words + `"`, `["` + words + `"]`, `[{"text":"` + words + `"}]`} {
			body := `{"model":"text-embedding-3-small","` + field + `":` + shape + `}`
			if got := w.Embeddings([]byte(body)).InputTokens; got != base {
				t.Errorf("%s: weighs %d input tokens, want %d (as input)", body[:min(len(body), 60)], got, base)
			}
			both := `{"model":"text-embedding-3-small","input":"` + words + `","` + field + `":` + shape + `}`
			if got := w.Embeddings([]byte(both)).InputTokens; got < 2*base-1 {
				t.Errorf("input and %s: weigh %d input tokens, want about %d", field, got, 2*base)
			}
		}
	}
	// An image under one of them is hidden context, as under input.
	if est := w.Embeddings([]byte(`{"model":"text-embedding-3-small","inputs":[{"image":"https://example.com/a.png"}]}`)); !est.ServerContext {
		t.Errorf("an image under inputs: ServerContext false, want true")
	}
}
