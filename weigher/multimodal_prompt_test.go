package weigher

import "testing"

// llama.cpp's completions take a prompt object {"prompt_string": …,
// "multimodal_data": ["<base64 image or audio>", …]}, alone or in a list
// of prompts (tools/server README, POST /completion): each medium becomes
// as many tokens as the model's projector makes of it, which its base64
// text does not bound. Weighed by its JSON text, a 1×1 PNG was ~60 tokens
// the upstream bills hundreds for: hidden context now, the model's
// largest input reserved.
func TestMultimodalPromptIsHidden(t *testing.T) {
	const img = `"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABc3UBGAAAAABJRU5ErkJggg=="`
	w := testWeigher(t)
	for _, tc := range []struct {
		name   string
		kind   Kind
		body   string
		hidden bool
	}{
		{"object prompt", KindCompletions, `{"model":"gpt-4o-mini","prompt":{"prompt_string":"<__media__> what is it?","multimodal_data":[` + img + `]},"max_tokens":8}`, true},
		{"object in a list of prompts", KindCompletions, `{"model":"gpt-4o-mini","prompt":["hi",[1,2],{"prompt_string":"<__media__>","multimodal_data":[` + img + `]}],"max_tokens":8}`, true},
		{"one medium as a string", KindCompletions, `{"model":"gpt-4o-mini","prompt":{"prompt_string":"<__media__>","multimodal_data":` + img + `},"max_tokens":8}`, true},
		{"chat prompt list (OpenRouter's prompt)", KindChat, `{"model":"gpt-4o-mini","prompt":[{"prompt_string":"<__media__>","multimodal_data":[` + img + `]}],"max_tokens":8}`, true},
		{"no media", KindCompletions, `{"model":"gpt-4o-mini","prompt":{"prompt_string":"what is it?"},"max_tokens":8}`, false},
		{"empty media list", KindCompletions, `{"model":"gpt-4o-mini","prompt":{"prompt_string":"what is it?","multimodal_data":[]},"max_tokens":8}`, false},
		{"null media", KindCompletions, `{"model":"gpt-4o-mini","prompt":[{"prompt_string":"what is it?","multimodal_data":null}],"max_tokens":8}`, false},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if !est.Parsed || est.ServerContext != tc.hidden {
			t.Errorf("%s: parsed %v, ServerContext %v, want %v", tc.name, est.Parsed, est.ServerContext, tc.hidden)
		}
		if tc.hidden && est.InputTokens < DefaultMaxInputTokens {
			t.Errorf("%s: %d input tokens, want the model's largest input (%d)", tc.name, est.InputTokens, DefaultMaxInputTokens)
		}
		if !tc.hidden && est.InputTokens >= DefaultMaxInputTokens {
			t.Errorf("%s: %d input tokens, want the text's", tc.name, est.InputTokens)
		}
	}
}
