package app

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// llama.cpp's /v1/completions takes a prompt object {"prompt_string": …,
// "multimodal_data": ["<base64>", …]} (tools/server README, POST
// /completion), and bills each medium as the tokens its projector makes
// of it: the upstream below bills 900 per medium beside the words. llmguard
// weighed the object by its JSON text (~60 tokens for a 1×1 PNG) and
// admitted six of ten such calls through a 5,000-token bucket (5,472
// billed). As
// hidden context each reserves the model's largest input (1,000 here) and
// the bucket is never overspent.
func TestMultimodalPromptIsReserved(t *testing.T) {
	const img = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABc3UBGAAAAABJRU5ErkJggg=="
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		in := int64(0)
		prompts := []any{body["prompt"]}
		if list, ok := body["prompt"].([]any); ok {
			prompts = list
		}
		for _, p := range prompts {
			if o, ok := p.(map[string]any); ok {
				in += words(o["prompt_string"])
				if media, ok := o["multimodal_data"].([]any); ok {
					in += 900 * int64(len(media)) // the projector's tokens per medium
				}
			} else {
				in += words(p)
			}
		}
		out := int64(16)
		if m, ok := body["max_tokens"].(float64); ok {
			out = int64(m)
		}
		return in, out
	})
	yaml := strings.Replace(baseConfig(t, up.url, `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 5000}
`), "    default_max_output_tokens: 256\n", "    default_max_output_tokens: 256\n    max_input_tokens: 1000\n", 1)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body string }{
		{"object prompt", `{"model":"gpt-4o-mini","prompt":{"prompt_string":"<__media__> what is it?","multimodal_data":["` + img + `"]},"max_tokens":8}`},
		{"object in a list", `{"model":"gpt-4o-mini","prompt":[{"prompt_string":"<__media__> what is it?","multimodal_data":["` + img + `"]}],"max_tokens":8}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenHarness(t, cfg)
			if passed := up.callThrough(t, h, "/v1/completions", tc.body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
