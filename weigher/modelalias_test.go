package weigher

import (
	"strconv"
	"testing"
)

// Every spelling Ollama serves as llama3.1:latest (spec.CanonModel) is
// weighed as that configured model: its hidden-context reservation (its
// max_input_tokens, not the smaller llama3's), its output default and its
// usage ceiling; a configured name with the default namespace settles
// every tag of it; a name of another model keeps the prefix it had.
func TestOllamaSpellingsTakeTheConfiguredModel(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"llama3.1:latest": {MaxInputTokens: 128_000, DefaultMaxOutputTokens: 700},
		"llama3":          {MaxInputTokens: 8_000, DefaultMaxOutputTokens: 50},
		"library/qwen2":   {MaxInputTokens: 32_000, DefaultMaxOutputTokens: 300},
	}, DefaultMaxOutputTokens: 100, DefaultMaxInputTokens: 1_000})
	if err != nil {
		t.Fatal(err)
	}
	body := func(model string) []byte {
		return []byte(`{"model":` + strconv.Quote(model) + `,"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`)
	}
	for _, tc := range []struct {
		model    string
		in, out  int64 // hidden input reserved, output default
		ceilings int64 // Ceiling's input for one call: the window
	}{
		{"llama3.1", 128_000, 700, 128_000},
		{"llama3.1:latest", 128_000, 700, 128_000},
		{"library/llama3.1", 128_000, 700, 128_000},
		{"registry.ollama.ai/library/llama3.1:latest", 128_000, 700, 128_000},
		{"https://Registry.Ollama.AI/Library/Llama3.1", 128_000, 700, 128_000},
		{"qwen2:7b", 32_000, 300, 32_000},
		{"registry.ollama.ai/library/qwen2", 32_000, 300, 32_000},
		{"llama3.1-instruct", 8_000, 50, 8_000}, // llama3's prefix: llama3.1:latest names one tag
		{"llama3:8b", 8_000, 50, 8_000},
		{"mistral", 1_000, 100, DefaultCeilingWindow},
	} {
		e := w.Weigh(KindChat, body(tc.model))
		if !e.ServerContext || e.InputTokens != tc.in || e.OutputTokens != tc.out {
			t.Errorf("%q: hidden %v, input %d, output %d; want input %d, output %d", tc.model, e.ServerContext, e.InputTokens, e.OutputTokens, tc.in, tc.out)
		}
		e.ServerContext, e.InputTokens = false, 1 // one call of a small body: the window bounds its input
		if c := w.Ceiling(&e); c.InputTokens != tc.ceilings {
			t.Errorf("%q: ceiling input %d, want %d", tc.model, c.InputTokens, tc.ceilings)
		}
	}
}

// Two configured names of one canonical form: each exact spelling keeps
// its own settings, and another spelling takes one of them, the same one
// every time (the longest prefix form).
func TestOllamaSpellingsCollide(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"llama3.1":        {MaxInputTokens: 64_000},
		"llama3.1:latest": {MaxInputTokens: 128_000},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]int64{"llama3.1": 64_000, "llama3.1:latest": 128_000, "library/llama3.1:latest": 64_000} {
		if got := w.maxInput(model); got != want {
			t.Errorf("%q: max input %d, want %d", model, got, want)
		}
	}
}

// Looking a model's settings up allocates nothing, for a name with
// capitals that no configured name spells exactly too (a vLLM model such
// as Qwen/Qwen2.5-7B-Instruct): its canonical form is folded into a
// buffer on the stack, not a new string per request.
func TestConfiguredLookupAllocatesNothing(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"llama3.1:latest": {MaxInputTokens: 128_000},
		"qwen/qwen2.5":    {MaxInputTokens: 32_000},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		in    int64 // MaxInputTokens found; 0 for none
	}{
		{"Qwen/Qwen2.5-7B-Instruct", 32_000}, // by the prefix walk
		{"Library/Llama3.1", 128_000},        // by canonical form
		{"Mistral-Large-Latest", 0},          // none
	} {
		var m Model
		if n := testing.AllocsPerRun(100, func() { m, _ = w.configured(tc.model) }); n != 0 {
			t.Errorf("configured(%q): %v allocations, want 0", tc.model, n)
		}
		if m.MaxInputTokens != tc.in {
			t.Errorf("configured(%q) max_input_tokens %d, want %d", tc.model, m.MaxInputTokens, tc.in)
		}
	}
}
