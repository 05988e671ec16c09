package weigher

import "testing"

// llama.cpp's n_predict replaces the body's max_tokens on its chat and
// completions routes, and its Responses route reads a body's max_tokens
// (and n_predict) when max_output_tokens is absent: each was weighed as a
// few tokens of text, the output reservation left at the body's maximum
// or the model's default (1,000 here). TabbyAPI reads max_length as
// max_tokens when the body has none: a body naming no maximum by the
// OpenAI name reserved the default. llama.cpp's n_cmpl, its count of
// completions ("n" is its fallback alias), reserved one.
func TestLlamaCppOutputMaximumIsReserved(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name      string
		kind      Kind
		body      string
		want      int64 // OutputTokens
		defaulted bool
		pinned    bool
	}{
		{"chat n_predict over max_tokens", KindChat, `{"model":"my-model","messages":[],"max_tokens":10,"n_predict":9000}`, 9000, false, true},
		{"chat n_predict, no max", KindChat, `{"model":"my-model","messages":[],"n_predict":9000}`, 9000, false, true},
		{"chat n_predict below max_tokens", KindChat, `{"model":"my-model","messages":[],"max_tokens":5000,"n_predict":10}`, 5000, false, true},
		{"chat n_predict as a string", KindChat, `{"model":"my-model","messages":[],"max_tokens":10,"n_predict":"9000"}`, 9000, false, true},
		{"chat n_predict -1", KindChat, `{"model":"my-model","messages":[],"max_tokens":10,"n_predict":-1}`, 1000, false, true},
		{"chat n_predict -1, ignore_eos", KindChat, `{"model":"my-model","messages":[],"max_tokens":10,"n_predict":-1,"ignore_eos":true}`, DefaultMaxInputTokens, false, true},
		{"chat n_predict null", KindChat, `{"model":"my-model","messages":[],"max_tokens":10,"n_predict":null}`, 10, false, false},
		{"chat n_predict, n 2", KindChat, `{"model":"my-model","messages":[],"n":2,"n_predict":9000}`, 18000, false, true},
		{"completions n_predict", KindCompletions, `{"model":"my-model","prompt":"hi","max_tokens":10,"n_predict":700}`, 700, false, true},
		{"completions n_predict -1", KindCompletions, `{"model":"my-model","prompt":"hi","n_predict":-1}`, 1000, true, true},
		{"chat max_length, no max", KindChat, `{"model":"my-model","messages":[],"max_length":9000}`, 9000, false, true},
		{"chat max_length below max_tokens", KindChat, `{"model":"my-model","messages":[],"max_tokens":5000,"max_length":10}`, 5000, false, true},
		{"completions max_length", KindCompletions, `{"model":"my-model","prompt":"hi","max_length":700,"max_tokens":10}`, 700, false, true},
		// No max_tokens: llama.cpp, which ignores max_length, runs to the
		// context's end, so the model's default stands (1,000 here).
		{"completions max_length, no max", KindCompletions, `{"model":"my-model","prompt":"hi","max_length":700}`, 1000, false, true},
		{"chat n_cmpl", KindChat, `{"model":"my-model","messages":[],"max_tokens":100,"n_cmpl":4}`, 400, false, false},
		{"chat n_cmpl below n", KindChat, `{"model":"my-model","messages":[],"max_tokens":100,"n":3,"n_cmpl":2}`, 300, false, false},
		{"completions n_cmpl", KindCompletions, `{"model":"my-model","prompt":"hi","max_tokens":100,"n_cmpl":4}`, 400, false, false},
		{"completions n_cmpl, two prompts", KindCompletions, `{"model":"my-model","prompt":["a","b"],"max_tokens":100,"n_cmpl":4}`, 800, false, false},
		{"responses max_tokens", KindResponses, `{"model":"my-model","input":"hi","max_tokens":9000}`, 9000, false, false},
		{"responses both maxima", KindResponses, `{"model":"my-model","input":"hi","max_output_tokens":20,"max_tokens":9000}`, 9000, false, false},
		{"responses n_predict", KindResponses, `{"model":"my-model","input":"hi","max_output_tokens":20,"n_predict":9000}`, 9000, false, true},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if !est.Parsed || est.OutputTokens != tc.want || est.OutputDefaulted != tc.defaulted || est.OutputPinned != tc.pinned {
			t.Errorf("%s: OutputTokens %d (defaulted %v, pinned %v, parsed %v), want %d (defaulted %v, pinned %v)",
				tc.name, est.OutputTokens, est.OutputDefaulted, est.OutputPinned, est.Parsed, tc.want, tc.defaulted, tc.pinned)
		}
	}
}

// TensorRT-LLM's chat route reads best_of (ChatCompletionRequest's
// sampling parameters, tensorrt_llm/serve/openai_protocol.py): best_of
// sequences are generated and the best n returned; it reserved n.
// KoboldCpp's chat route takes an "adapter" object's max_length as the
// output maximum when the body names none (transform_genparams,
// koboldcpp.py); it reserved the model's default (1,000 here).
func TestChatBestOfAndAdapterMaxLengthAreReserved(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name      string
		body      string
		want      int64 // OutputTokens
		choices   int64
		defaulted bool
	}{
		{"best_of", `{"model":"my-model","messages":[],"max_tokens":100,"best_of":4}`, 400, 4, false},
		{"best_of as a string", `{"model":"my-model","messages":[],"max_tokens":100,"best_of":"4"}`, 400, 4, false},
		{"best_of below n", `{"model":"my-model","messages":[],"max_tokens":100,"n":3,"best_of":2}`, 300, 3, false},
		{"best_of, defaulted", `{"model":"my-model","messages":[],"best_of":3}`, 3000, 3, true},
		{"adapter max_length, no max", `{"model":"my-model","messages":[],"adapter":{"max_length":9000}}`, 9000, 1, false},
		{"adapter max_length below the default", `{"model":"my-model","messages":[],"adapter":{"max_length":10}}`, 1000, 1, false},
		{"adapter max_length beside max_tokens", `{"model":"my-model","messages":[],"max_tokens":50,"adapter":{"max_length":9000}}`, 50, 1, false},
		{"adapter max_length beside max_completion_tokens", `{"model":"my-model","messages":[],"max_completion_tokens":50,"adapter":{"max_length":9000}}`, 50, 1, false},
		{"adapter not an object", `{"model":"my-model","messages":[],"adapter":9000}`, 1000, 1, true},
	} {
		est := w.Weigh(KindChat, []byte(tc.body))
		if !est.Parsed || est.OutputTokens != tc.want || est.Choices != tc.choices || est.OutputDefaulted != tc.defaulted || est.OutputPinned {
			t.Errorf("%s: OutputTokens %d, Choices %d (defaulted %v, pinned %v, parsed %v), want %d, %d (defaulted %v, not pinned)",
				tc.name, est.OutputTokens, est.Choices, est.OutputDefaulted, est.OutputPinned, est.Parsed, tc.want, tc.choices, tc.defaulted)
		}
	}
}
