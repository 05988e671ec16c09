package policy

import (
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// A usage's per-request search fee (Perplexity's search_context_size) and
// file search calls (OpenAI's file_search_call, $2.50 per 1,000) are
// priced on top of its tokens: the model's fee at the size reported, the
// dearest Perplexity documents (Pro Search: $14, $18, $22 per 1,000) at a
// size the model's price leaves unset; a hosted tool's container
// gigabyte-sessions ($0.03 each) are too, and so are the image generation
// tool's image tokens ($40 per million) and Anthropic's code execution
// minutes ($0.05 an hour, rounded up per minute); MicroUSD's text path
// leaves such a usage to the general one.
func TestSearchAndFileFeesPriced(t *testing.T) {
	sonar := compileModel(config.Model{InputUSDPerMTok: 1, OutputUSDPerMTok: 1, SearchRequestUSDPerK: config.SearchFees{Low: 5, High: 12}})
	for _, tc := range []struct {
		name string
		p    Price
		u    spec.Usage
		want int64 // µUSD
	}{
		{"no fee", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40}, 50},
		{"low", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextLow}, 50 + 5_000},
		{"high", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextHigh}, 50 + 12_000},
		{"medium unset: the default", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextMedium}, 50 + 35_000},
		{"flex tier keeps the fee", sonar.flex, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextHigh}, 50 + 12_000},
		{"no fee priced: the default", Price{}, spec.Usage{SearchContext: spec.SearchContextHigh}, 50_000},
		{"waived: none", Price{SearchRequest: SearchFees{Medium: SearchFeeWaived}}, spec.Usage{SearchContext: spec.SearchContextMedium}, 0},
		{"waived at another size: the default", Price{SearchRequest: SearchFees{Medium: SearchFeeWaived}}, spec.Usage{SearchContext: spec.SearchContextLow}, 30_000},
		{"file searches", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, FileSearches: 3}, 50 + 7_500},
		{"negative file searches", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, FileSearches: -3}, 50},
		{"openrouter web results", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchResults: 5}, 50 + 20_000},
		{"negative web results", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, SearchResults: -5}, 50},
		{"a 64 GB container", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, ContainerGB: 64}, 50 + 1_920_000},
		{"flex tier keeps the container fee", sonar.flex, spec.Usage{ContainerGB: 1}, 30_000},
		{"negative containers", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, ContainerGB: -4}, 50},
		{"a high 1024x1536 image", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, ImageTokens: 6240}, 50 + 249_600},
		{"negative image tokens", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, ImageTokens: -6240}, 50},
		{"an hour of code execution", sonar.standard, spec.Usage{InputTokens: 10, OutputTokens: 40, CodeExecutionMinutes: 60}, 50 + 50_001},
		{"flex tier keeps the image fee", sonar.flex, spec.Usage{ImageTokens: 272}, 10_880},
	} {
		if got := tc.p.MicroUSD(tc.u); got != tc.want {
			t.Errorf("%s: %d µUSD, want %d", tc.name, got, tc.want)
		}
		textCostCase(t, tc.p, tc.u)
	}
}

// SearchMicroUSD is the search fees' part of MicroUSD: every fee, no
// token, rounded up on its own; with no token priced the two agree.
func TestSearchMicroUSD(t *testing.T) {
	sonar := compileModel(config.Model{InputUSDPerMTok: 1, OutputUSDPerMTok: 1, SearchRequestUSDPerK: config.SearchFees{Low: 5, High: 12}})
	for _, tc := range []struct {
		name string
		u    spec.Usage
		want int64 // µUSD
	}{
		{"tokens only", spec.Usage{InputTokens: 10, OutputTokens: 40}, 0},
		{"every fee", spec.Usage{InputTokens: 10, OutputTokens: 40, WebSearches: 2, FileSearches: 1, SearchContext: spec.SearchContextLow, SearchResults: 3},
			2*10_000 + 2_500 + 5_000 + 3*4_000},
		{"negatives", spec.Usage{WebSearches: -2, FileSearches: -1, SearchResults: -3}, 0},
	} {
		if got := sonar.standard.SearchMicroUSD(tc.u); got != tc.want {
			t.Errorf("%s: %d µUSD, want %d", tc.name, got, tc.want)
		}
		fees := tc.u
		fees.InputTokens, fees.OutputTokens = 0, 0
		if got, all := sonar.standard.SearchMicroUSD(tc.u), sonar.standard.MicroUSD(fees); got != all {
			t.Errorf("%s: SearchMicroUSD %d, MicroUSD of the fees alone %d", tc.name, got, all)
		}
	}
}

// A config's search_request_usd_per_k size written as 0 reaches the price
// as waived: no fee at that size, the default at a size left out.
func TestSearchFeeWaivedFromConfig(t *testing.T) {
	c, err := config.Parse([]byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  local: {input_usd_per_mtok: 1, output_usd_per_mtok: 1, search_request_usd_per_k: {medium: 0}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := compileModel(c.Models["local"]).standard
	if got := p.MicroUSD(spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextMedium}); got != 50 {
		t.Errorf("medium waived: %d µUSD, want 50 (the tokens alone)", got)
	}
	if got := p.MicroUSD(spec.Usage{InputTokens: 10, OutputTokens: 40, SearchContext: spec.SearchContextLow}); got != 50+30_000 {
		t.Errorf("low left out: %d µUSD, want %d (the default fee)", got, 50+30_000)
	}
}
