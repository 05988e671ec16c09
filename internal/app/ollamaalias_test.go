package app

// Ollama reads a model name as [host/][namespace/]model[:tag] and fills
// what is left out with registry.ollama.ai, library and latest
// (ollama/ollama types/model/name.go), so llama3.1, llama3.1:latest,
// library/llama3.1 and registry.ollama.ai/library/llama3.1:latest are one
// model, billed alike. Each test drives llmguard through loopback sockets
// to a billing upstream that serves every spelling, and fails where the
// upstream billed more than the limit held.

import (
	"fmt"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// ollamaVariants are spellings Ollama serves as llama3.1:latest.
var ollamaVariants = []string{"llama3.1", "library/llama3.1", "registry.ollama.ai/library/llama3.1:latest", "Library/Llama3.1:LATEST"}

// A 1,000-token rule on llama3.1:latest held only names of that spelling
// (and its cases): llama3.1 went through unlimited, six calls of 300
// output tokens. Rules now match every spelling of the model, and a rule
// on the short name holds the long ones.
func TestModelRuleHoldsEveryOllamaSpelling(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		m, _ := body["max_tokens"].(float64)
		return words(body["messages"]), int64(m)
	})
	for _, tc := range []struct{ glob, name string }{
		{"llama3.1:latest", "llama3.1"},
		{"llama3.1:latest", "library/llama3.1"},
		{"llama3.1", "registry.ollama.ai/library/llama3.1:latest"},
		{"registry.ollama.ai/library/llama3.1:latest", "llama3.1"},
		{"library/*", "Llama3.1:latest"},
	} {
		t.Run(tc.glob+" "+tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(baseConfig(t, up.url, fmt.Sprintf(`limits:
  - {name: llama-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, models: [%q]}
`, tc.glob))))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":300}`, tc.name)
			if passed := up.callThrough(t, h, "/v1/chat/completions", body, 6, 1000); passed == 0 {
				t.Errorf("no call passed: the spelling tests nothing")
			}
		})
	}
}

// A spelling of a priced Ollama model had no price of its own, so
// default_price priced it, 60 times below the model's output price. Quote
// now resolves the one priced name of the same canonical form.
func TestOllamaSpellingIsPricedAsItself(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		m, _ := body["max_tokens"].(float64)
		return words(body["messages"]), int64(m)
	})
	for _, name := range ollamaVariants {
		t.Run(name, func(t *testing.T) {
			yaml := baseConfig(t, up.url, `  "llama3.1:latest": {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
default_price: {input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.01}
limits:
  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.001, period: day}
`)
			cfg, err := config.Parse([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			up.pricedThrough(t, frozenHarness(t, cfg), name, "llama3.1:latest")
		})
	}
}

// A request with hidden context reserves its model's max_input_tokens; in
// another spelling the model's settings were not found and it reserved
// default_max_input_tokens (1,000) where llama3.1:latest's window is
// 50,000. The weigher now finds the configured model by canonical form.
func TestOllamaSpellingReservesItsWindow(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) {
		return 50000, 10 // the stored conversation fills the window
	})
	for _, name := range ollamaVariants {
		t.Run(name, func(t *testing.T) {
			yaml := baseConfig(t, up.url, `  "llama3.1:latest": {max_input_tokens: 50000, default_max_output_tokens: 256}
default_max_input_tokens: 1000
limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 60000}
`)
			cfg, err := config.Parse([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			body := fmt.Sprintf(`{"model":%q,"previous_response_id":"resp_1","input":"go on","max_output_tokens":10}`, name)
			if passed := up.callThrough(t, h, "/v1/responses", body, 5, 60000); passed == 0 {
				t.Errorf("no call passed: the spelling tests nothing")
			}
		})
	}
}
