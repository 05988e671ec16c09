package weigher

import "testing"

// Claude names in any case, and Claude names not known to be on the older
// tokenizer (a later version, an alias), get the newer tokenizer's factor:
// "Anthropic/Claude-Opus-4.7" had 1 and "claude-opus-4-10" or
// "claude-opus-latest" the older factor, below what they are billed.
func TestClaudeFactorByName(t *testing.T) {
	for name, want := range map[string]float64{
		"claude-opus-4-7":                            NewTokenizerClaudeSafetyFactor,
		"Anthropic/Claude-Opus-4.7":                  NewTokenizerClaudeSafetyFactor,
		"CLAUDE-OPUS-4-7":                            NewTokenizerClaudeSafetyFactor,
		"claude-opus-4-10":                           NewTokenizerClaudeSafetyFactor,
		"claude-opus-latest":                         NewTokenizerClaudeSafetyFactor,
		"~anthropic/claude-opus-latest":              NewTokenizerClaudeSafetyFactor,
		"claude-sonnet-5":                            NewTokenizerClaudeSafetyFactor,
		"claude-opus-4-6":                            DefaultClaudeSafetyFactor,
		"claude-opus-4-5-20251101":                   DefaultClaudeSafetyFactor,
		"claude-opus-4-1-20250805":                   DefaultClaudeSafetyFactor,
		"claude-opus-4-20250514":                     DefaultClaudeSafetyFactor,
		"claude-opus-4":                              DefaultClaudeSafetyFactor,
		"claude-opus-4@20250514":                     DefaultClaudeSafetyFactor,
		"us.anthropic.claude-opus-4-1-20250805-v1:0": DefaultClaudeSafetyFactor,
		"claude-sonnet-4-6":                          DefaultClaudeSafetyFactor,
		"Claude-3-5-Sonnet-Latest":                   DefaultClaudeSafetyFactor,
		"claude-haiku-4-5":                           DefaultClaudeSafetyFactor,
		"gpt-4o-mini":                                1,
		"GPT-4o-mini":                                1,
	} {
		if got := familySafetyFactor(name); got != want {
			t.Errorf("familySafetyFactor(%q) = %v, want %v", name, got, want)
		}
	}
}
