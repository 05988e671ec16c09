package config

// prices55 (2026-12-07): the embedded table's windows and prices against
// the providers' own pages, model by model.

import "testing"

// TestPrices55DocumentedWindowsAndPrices holds every chat entry of the
// embedded table at or above what its provider documents: the input a
// hidden-context request reserves (max_input_tokens, tokens) and the
// standard input, cached-input and output prices (USD per million
// tokens). A value below the page lets a call bill more than llmguard
// reserved; above it over-reserves, which is safe. Sources: OpenAI's
// model pages and pricing page (developers.openai.com/api/docs), where a
// 400K window less its 128K output leaves 272K of input; Anthropic's
// pricing page and model pages (platform.claude.com/docs). The Claude
// 5-series rows and gpt-5.4-nano were missing from the table, so their
// hidden context reserved default_max_input_tokens (200K).
func TestPrices55DocumentedWindowsAndPrices(t *testing.T) {
	table, err := ParsePrices(DefaultPricesJSON)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model              string
		window             int64   // documented largest input, tokens: the context window, or the input limit OpenAI gives (272K of a 400K window)
		in, cached, out    float64 // documented USD per million tokens; cached 0: none listed
		longAbove          int64   // documented long-prompt threshold, input tokens; 0: none
		longIn, longOutput float64 // its prices, USD per million tokens
	}{
		{model: "gpt-5.5", window: 1_050_000, in: 5, cached: 0.5, out: 30, longAbove: 272_000, longIn: 10, longOutput: 45},
		{model: "gpt-5.5-pro", window: 1_050_000, in: 30, out: 180, longAbove: 272_000, longIn: 60, longOutput: 270},
		{model: "gpt-5.4", window: 1_050_000, in: 2.5, cached: 0.25, out: 15, longAbove: 272_000, longIn: 5, longOutput: 22.5},
		{model: "gpt-5.4-pro", window: 1_050_000, in: 30, out: 180, longAbove: 272_000, longIn: 60, longOutput: 270},
		{model: "gpt-5.4-mini", window: 272_000, in: 0.75, cached: 0.075, out: 4.5},
		{model: "gpt-5.4-nano", window: 272_000, in: 0.2, cached: 0.02, out: 1.25},
		{model: "gpt-5.2", window: 272_000, in: 1.75, cached: 0.175, out: 14},
		{model: "gpt-5.2-pro", window: 272_000, in: 21, out: 168},
		{model: "gpt-5.1", window: 272_000, in: 1.25, cached: 0.125, out: 10},
		{model: "gpt-5.1-codex", window: 272_000, in: 1.25, cached: 0.125, out: 10},
		{model: "gpt-5", window: 272_000, in: 1.25, cached: 0.125, out: 10},
		{model: "gpt-5-codex", window: 272_000, in: 1.25, cached: 0.125, out: 10},
		{model: "gpt-5-chat-latest", window: 128_000, in: 1.25, cached: 0.125, out: 10},
		{model: "gpt-5-mini", window: 272_000, in: 0.25, cached: 0.025, out: 2},
		{model: "gpt-5-nano", window: 272_000, in: 0.05, cached: 0.005, out: 0.4},
		{model: "gpt-5-pro", window: 400_000 - 272_000, in: 15, out: 120},
		{model: "o1", window: 200_000, in: 15, cached: 7.5, out: 60},
		{model: "o1-pro", window: 200_000, in: 150, out: 600},
		{model: "o1-mini", window: 128_000, in: 1.1, cached: 0.55, out: 4.4},
		{model: "o3", window: 200_000, in: 2, cached: 0.5, out: 8},
		{model: "o3-pro", window: 200_000, in: 20, out: 80},
		{model: "o3-mini", window: 200_000, in: 1.1, cached: 0.55, out: 4.4},
		{model: "o3-deep-research", window: 200_000, in: 10, cached: 2.5, out: 40},
		{model: "o4-mini", window: 200_000, in: 1.1, cached: 0.275, out: 4.4},
		{model: "o4-mini-deep-research", window: 200_000, in: 2, cached: 0.5, out: 8},
		{model: "gpt-4.1", window: 1_047_576, in: 2, cached: 0.5, out: 8},
		{model: "gpt-4.1-mini", window: 1_047_576, in: 0.4, cached: 0.1, out: 1.6},
		{model: "gpt-4.1-nano", window: 1_047_576, in: 0.1, cached: 0.025, out: 0.4},
		{model: "gpt-4o", window: 128_000, in: 2.5, cached: 1.25, out: 10},
		{model: "gpt-4o-2024-05-13", window: 128_000, in: 5, out: 15},
		{model: "gpt-4o-mini", window: 128_000, in: 0.15, cached: 0.075, out: 0.6},
		{model: "gpt-4-turbo", window: 128_000, in: 10, out: 30},
		{model: "gpt-4", window: 8_192, in: 30, out: 60},
		{model: "gpt-3.5-turbo", window: 16_385, in: 0.5, out: 1.5},
		{model: "gpt-3.5-turbo-instruct", window: 4_096, in: 1.5, out: 2},
		{model: "claude-haiku-5-5", window: 1_000_000, in: 0.1, cached: 0.01, out: 0.5, longAbove: 100_000, longIn: 0.5, longOutput: 2.5},
		{model: "claude-sonnet-5-5", window: 1_000_000, in: 2, cached: 0.1, out: 10},
		{model: "claude-sonnet-5", window: 1_000_000, in: 2, cached: 0.2, out: 10},
		{model: "claude-opus-5-5", window: 1_000_000, in: 4, cached: 0.2, out: 20},
		{model: "claude-opus-5", window: 1_000_000, in: 5, cached: 0.5, out: 25},
		{model: "claude-fable-5-2", window: 1_000_000, in: 8, cached: 0.2, out: 40},
		{model: "claude-fable-5-1", window: 1_000_000, in: 10, cached: 0.25, out: 50},
		{model: "claude-mythos-5-1", window: 1_000_000, in: 10, cached: 0.25, out: 50},
		{model: "claude-fable-5", window: 1_000_000, in: 10, cached: 1, out: 50},
		{model: "claude-mythos-5", window: 1_000_000, in: 10, cached: 1, out: 50},
		{model: "claude-opus-4-8", window: 1_000_000, in: 5, cached: 0.5, out: 25},
		{model: "claude-opus-4-7", window: 1_000_000, in: 5, cached: 0.5, out: 25},
		{model: "claude-opus-4-6", window: 1_000_000, in: 5, cached: 0.5, out: 25},
		{model: "claude-opus-4-5", window: 200_000, in: 5, cached: 0.5, out: 25},
		{model: "claude-opus-4-1", window: 200_000, in: 15, cached: 1.5, out: 75},
		{model: "claude-opus-4", window: 200_000, in: 15, cached: 1.5, out: 75},
		{model: "claude-sonnet-4-6", window: 1_000_000, in: 3, cached: 0.3, out: 15},
		{model: "claude-sonnet-4-5", window: 200_000, in: 3, cached: 0.3, out: 15},
		{model: "claude-sonnet-4", window: 200_000, in: 3, cached: 0.3, out: 15},
		{model: "claude-haiku-4-5", window: 200_000, in: 1, cached: 0.1, out: 5},
		{model: "claude-3-7-sonnet", window: 200_000, in: 3, cached: 0.3, out: 15},
		{model: "claude-3-5-haiku", window: 200_000, in: 0.8, cached: 0.08, out: 4},
		{model: "claude-3-haiku", window: 200_000, in: 0.25, cached: 0.03, out: 1.25},
		{model: "claude-3-opus", window: 200_000, in: 15, cached: 1.5, out: 75},
	} {
		m, ok := table[c.model]
		if !ok {
			t.Errorf("%s: not in the table (its hidden context reserves default_max_input_tokens)", c.model)
			continue
		}
		if m.MaxInputTokens < c.window {
			t.Errorf("%s: max_input_tokens %d below the documented %d", c.model, m.MaxInputTokens, c.window)
		}
		cached := m.CachedInputUSDPerMTok
		if cached == 0 { // none listed: cache hits are priced as input
			cached = m.InputUSDPerMTok
		}
		if m.InputUSDPerMTok < c.in || cached < c.cached || m.OutputUSDPerMTok < c.out {
			t.Errorf("%s: $%g / $%g cached / $%g output per million, below the documented $%g / $%g / $%g",
				c.model, m.InputUSDPerMTok, cached, m.OutputUSDPerMTok, c.in, c.cached, c.out)
		}
		if c.longAbove == 0 {
			continue
		}
		if lc := m.LongContext; lc == nil || lc.AboveInputTokens > c.longAbove || lc.InputUSDPerMTok < c.longIn || lc.OutputUSDPerMTok < c.longOutput {
			t.Errorf("%s: long-prompt band %+v, documented above %d input tokens at $%g / $%g", c.model, lc, c.longAbove, c.longIn, c.longOutput)
		}
	}
}
