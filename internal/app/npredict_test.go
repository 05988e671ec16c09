package app

import "testing"

// llama.cpp's server reads "n_predict" (its own name for the output
// maximum) over an OpenAI body's max_tokens on /v1/chat/completions and
// /v1/completions ("Exception: if "n_predict" is present, we overwrite the
// value specified earlier by "max_tokens"", oaicompat_chat_params_parse
// and oaicompat_completion_params_parse, tools/server), and its Responses
// route copies every member of the body into the chat request it makes,
// taking max_output_tokens as max_tokens only when it is given
// (server_chat_convert_responses_to_chatcmpl): a Responses body's own
// max_tokens, or n_predict, sets the output there. llmguard reserved the
// body's max_tokens (10) or the model's default (256) and weighed
// n_predict as a few tokens of text: five calls of 8,000 output tokens
// each went three times through a 20,000-token bucket (24,006 billed).
// TabbyAPI reads "max_length" as max_tokens when the body has none
// (BaseSamplerRequest, common/sampling.py): such a body reserved the
// model's default. llama.cpp's n_cmpl (its count of completions, "n" its
// fallback alias: make_llama_cmpl_schema) reserved one completion: four
// of 3,000 tokens each went through twice (24,0xx billed).
//
// The upstream below bills as llama.cpp and TabbyAPI: the output is
// n_predict when it is a positive count, else the maximum the route reads
// (max_length when no max_tokens).
func TestLlamaCppOutputMaximumIsReserved(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		in := words(body["messages"], body["prompt"], body["input"])
		out := int64(256)
		if m, ok := body["max_length"].(float64); ok {
			out = int64(m) // TabbyAPI's alias, read when max_tokens is absent
		}
		if m, ok := body["max_tokens"].(float64); ok {
			out = int64(m)
		}
		if m, ok := body["max_output_tokens"].(float64); ok {
			out = int64(m) // the Responses route's max_tokens, when given
		}
		if m, ok := body["n_predict"].(float64); ok && m > 0 {
			out = int64(m)
		}
		if c, ok := body["n_cmpl"].(float64); ok && c > 1 {
			out *= int64(c) // llama.cpp's count of completions
		}
		return in, out
	})
	for _, tc := range []struct{ name, path, body string }{
		{"chat n_predict over max_tokens", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_tokens":10,"n_predict":8000}`},
		{"chat n_predict, no max", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"n_predict":8000}`},
		{"chat n_predict beside max_completion_tokens", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_completion_tokens":10,"n_predict":8000}`},
		{"chat max_length (TabbyAPI)", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_length":8000}`},
		{"completions n_cmpl", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"write","max_tokens":3000,"n_cmpl":4}`},
		{"completions n_predict", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"write","max_tokens":10,"n_predict":8000}`},
		{"responses max_tokens", "/v1/responses", `{"model":"gpt-4o-mini","input":"write","max_tokens":8000}`},
		{"responses n_predict", "/v1/responses", `{"model":"gpt-4o-mini","input":"write","max_output_tokens":16,"n_predict":8000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			if passed := up.callThrough(t, h, tc.path, tc.body, 5, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// TensorRT-LLM's chat route reads best_of (ChatCompletionRequest,
// tensorrt_llm/serve/openai_protocol.py): best_of sequences are generated
// and the best n returned; llmguard reserved n of them. KoboldCpp's chat
// route takes the body's "adapter" object's max_length as the output
// maximum when the body names none (transform_genparams, koboldcpp.py);
// llmguard reserved the model's default (256).
//
// The upstream below bills as they generate: the body's maximum
// (max_tokens, else max_completion_tokens, else adapter.max_length, else
// 256) for each of max(n, best_of) sequences.
func TestChatBestOfAndAdapterMaxLengthAreReserved(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		in := words(body["messages"])
		out := int64(256)
		if a, ok := body["adapter"].(map[string]any); ok {
			if m, ok := a["max_length"].(float64); ok {
				out = int64(m)
			}
		}
		if m, ok := body["max_completion_tokens"].(float64); ok {
			out = int64(m)
		}
		if m, ok := body["max_tokens"].(float64); ok {
			out = int64(m)
		}
		seqs := int64(1)
		if c, ok := body["n"].(float64); ok && int64(c) > seqs {
			seqs = int64(c)
		}
		if c, ok := body["best_of"].(float64); ok && int64(c) > seqs {
			seqs = int64(c)
		}
		return in, out * seqs
	})
	for _, tc := range []struct{ name, body string }{
		{"best_of (TensorRT-LLM)", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_tokens":3000,"best_of":4}`},
		{"best_of beside n", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_tokens":3000,"n":2,"best_of":4}`},
		{"adapter max_length (KoboldCpp)", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"adapter":{"max_length":8000}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			if passed := up.callThrough(t, h, "/v1/chat/completions", tc.body, 5, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
