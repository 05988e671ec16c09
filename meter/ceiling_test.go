package meter

import (
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// TestOverCeiling: a figure above the ceiling is charged at it and its
// parts at most the bounded whole; a usage within it, or a ceiling of 0,
// is returned as it is.
func TestOverCeiling(t *testing.T) {
	c := spec.Usage{InputTokens: 1000, OutputTokens: 500, WebSearches: 10}
	for _, tc := range []struct {
		name string
		u    spec.Usage
		c    spec.Usage
		want spec.Usage
		over uint8
	}{
		{"step 1 (within)", spec.Usage{InputTokens: 1000, CachedInputTokens: 900, OutputTokens: 500, WebSearches: 10}, c,
			spec.Usage{InputTokens: 1000, CachedInputTokens: 900, OutputTokens: 500, WebSearches: 10}, 0},
		{"step 2 (no ceiling)", spec.Usage{InputTokens: 1e15, OutputTokens: 1e15}, spec.Usage{}, spec.Usage{InputTokens: 1e15, OutputTokens: 1e15}, 0},
		{"step 3 (input and its parts)", spec.Usage{InputTokens: 1e15, CachedInputTokens: 1e15, CacheWriteTokens: 1e14, CacheWrite1hTokens: 1e14, AudioInputTokens: 1e15, OutputTokens: 7}, c,
			spec.Usage{InputTokens: 1000, CachedInputTokens: 1000, CacheWriteTokens: 0, CacheWrite1hTokens: 0, AudioInputTokens: 1000, OutputTokens: 7}, 1 << figureInput},
		{"step 4 (output and its parts)", spec.Usage{InputTokens: 9, OutputTokens: 9e14, ReasoningTokens: 9e14, AudioOutputTokens: 3}, c,
			spec.Usage{InputTokens: 9, OutputTokens: 500, ReasoningTokens: 500, AudioOutputTokens: 3}, 1 << figureOutput},
		{"step 5 (searches)", spec.Usage{InputTokens: 9, OutputTokens: 9, WebSearches: 1e15}, c,
			spec.Usage{InputTokens: 9, OutputTokens: 9, WebSearches: 10}, 1 << figureWebSearches},
		{"step 6 (file searches)", spec.Usage{InputTokens: 9, OutputTokens: 9, FileSearches: 1e15}, spec.Usage{InputTokens: 1000, OutputTokens: 500, FileSearches: 10},
			spec.Usage{InputTokens: 9, OutputTokens: 9, FileSearches: 10}, 1 << figureFileSearches},
		{"step 7 (image tokens)", spec.Usage{InputTokens: 9, OutputTokens: 9, ImageTokens: 2e9}, spec.Usage{InputTokens: 1000, OutputTokens: 500, ImageTokens: 6540},
			spec.Usage{InputTokens: 9, OutputTokens: 9, ImageTokens: 6540}, 1 << figureImageTokens},
		{"step 8 (a cost the usage reports)", spec.Usage{InputTokens: 9, OutputTokens: 9, BilledMicroUSD: 1e18}, spec.Usage{InputTokens: 1000, OutputTokens: 500, BilledMicroUSD: 100_000_000},
			spec.Usage{InputTokens: 9, OutputTokens: 9, BilledMicroUSD: 100_000_000}, 1 << figureCost},
	} {
		got, over := overCeiling(tc.u, tc.c)
		if got != tc.want || over != tc.over {
			t.Errorf("%s: %+v over %b, want %+v over %b", tc.name, got, over, tc.want, tc.over)
		}
	}
}
