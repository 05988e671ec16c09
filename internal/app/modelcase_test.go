package app

// A model named in another case (GPT-4O-MINI for gpt-4o-mini) is the same
// model to an upstream that reads names case-insensitively — Ollama's
// names are ("Mistral" and "mistral" are the same model,
// ollama/ollama types/model/name.go) — so it must be limited, priced and
// reserved as that model. Each test drives llmguard through loopback
// sockets to a billing upstream that serves every spelling, and fails
// where the upstream billed more than the limit held.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// caseVariants are spellings of gpt-4o-mini in other ASCII cases, a dated
// snapshot among them.
var caseVariants = []string{"GPT-4O-MINI", "Gpt-4o-Mini", "gpt-4o-MINI-2024-07-18"}

// A rule on one model held only the spelling its glob was written in: a
// 1,000-token rule on Ollama's llama3.1:70b (unpriced: no priced name
// stood in for it) let Llama3.1:70B through unlimited, six calls of 300
// output tokens each, 1,8xx billed. MatchModel and the rule index now
// ignore ASCII case, for exact globs, prefixes and classes alike.
func TestModelRuleHoldsEveryCase(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		m, _ := body["max_tokens"].(float64)
		return words(body["messages"]), int64(m)
	})
	for _, tc := range []struct{ glob, name string }{
		{"llama3.1:70b", "Llama3.1:70B"},
		{"llama3.1:*", "LLAMA3.1:70b"},
		{"Llama3.1:*", "llama3.1:70b"},
		{"[l]lama3.1:70?", "Llama3.1:70B"},
		{"*:70b", "LLAMA3.1:70B"},
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
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// A model named in another case had no price of its own, so default_price
// priced it: gpt-4o-mini's $0.60 output at default_price's $0.01, 60 times
// less, five calls of 1,000 output tokens (3,0xx µUSD billed at
// gpt-4o-mini's prices) through a $0.001 quota. Quote now resolves the one
// priced name spelled so.
func TestModelInAnotherCaseIsPricedAsItself(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		m, _ := body["max_tokens"].(float64)
		return words(body["messages"]), int64(m)
	})
	for _, name := range caseVariants {
		t.Run(name, func(t *testing.T) {
			yaml := baseConfig(t, up.url, `default_price: {input_usd_per_mtok: 0.01, output_usd_per_mtok: 0.01}
limits:
  - {name: acme-usd, scope: tenant, unit: usd, quota: 0.001, period: day}
`)
			cfg, err := config.Parse([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			up.pricedThrough(t, frozenHarness(t, cfg), name, "gpt-4o-mini")
		})
	}
}

// A request with hidden context reserves its model's max_input_tokens;
// named in another case, the model's settings were not found and it
// reserved default_max_input_tokens (1,000 here) where gpt-4o-mini's
// window is 50,000: each call billed 50,000 input tokens through a
// 60,000-token bucket, five of five passing. The weigher now finds a
// configured model whatever its case.
func TestModelInAnotherCaseReservesItsWindow(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) {
		return 50000, 10 // the stored conversation fills the window
	})
	for _, name := range caseVariants {
		t.Run(name, func(t *testing.T) {
			yaml := strings.Replace(baseConfig(t, up.url, `default_max_input_tokens: 1000
limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 60000}
`), "    default_max_output_tokens: 256\n", "    default_max_output_tokens: 256\n    max_input_tokens: 50000\n", 1)
			cfg, err := config.Parse([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			body := fmt.Sprintf(`{"model":%q,"previous_response_id":"resp_1","input":"go on","max_output_tokens":10}`, name)
			if passed := up.callThrough(t, h, "/v1/responses", body, 5, 60000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// pricedThrough sends five chat calls of model name through h, each
// billed 1 input and 1,000 output tokens by u, and fails t when none
// passed or when those that passed cost more than h's 1,000 µUSD quota at
// $0.15 and $0.60 per million tokens, the prices of priced (gpt-4o-mini;
// llama3.1:latest in ollamaalias_test.go), which name should be priced as.
func (u *billing16) pricedThrough(t *testing.T, h *harness, name, priced string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`, name)
	before := u.billed.Load()
	passed := 0
	for range 5 {
		resp, b := h.do("/v1/chat/completions", body)
		switch resp.StatusCode {
		case 200:
			passed++
		case 429:
		default:
			t.Fatalf("%d %.200s", resp.StatusCode, b)
		}
	}
	if passed == 0 {
		t.Fatalf("no call passed: the spelling tests nothing")
	}
	// Each call billed 1 input token and 1,000 output tokens: 600.15 µUSD.
	tokens := u.billed.Load() - before
	if usd := float64(passed)*0.15 + float64(tokens-int64(passed))*0.60; usd > 1000 {
		t.Errorf("%d calls passed, billed %.0f µUSD at %s's prices through a 1,000 µUSD quota", passed, usd, priced)
	}
}
