package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A model's per-request search fee (search_request_usd_per_k, USD per
// 1,000 requests by search context size) is read from the config and
// from a prices_file's LiteLLM search_context_cost_per_query (USD per
// request: Perplexity's Sonar $0.005, $0.008, $0.012), the config's sizes
// over the file's; a negative fee is refused in either.
func TestSearchFeesRead(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prices.json"), []byte(`{
  "sonar": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06,
    "search_context_cost_per_query": {"search_context_size_low": 0.005, "search_context_size_medium": 0.008, "search_context_size_high": 0.012}},
  "sonar-pro": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
    "search_context_cost_per_query": {"search_context_size_low": 0.006, "search_context_size_medium": "x", "search_context_size_high": 0.014}}
}`), 0o644)
	cfgPath := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfgPath, []byte(`
prices_file: prices.json
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  sonar-pro: {search_request_usd_per_k: {medium: 10, high: 22}}
`), 0o644)
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Models["sonar"].SearchRequestUSDPerK, (SearchFees{Low: 5, Medium: 8, High: 12}); got != want {
		t.Errorf("sonar from the prices file: %+v, want %+v", got, want)
	}
	if got, want := c.Models["sonar-pro"].SearchRequestUSDPerK, (SearchFees{Low: 6, Medium: 10, High: 22}); got != want {
		t.Errorf("sonar-pro, the config over the file: %+v, want %+v", got, want)
	}
	if _, err := ParsePrices([]byte(`{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "search_context_cost_per_query": {"search_context_size_low": -0.005}}}`)); err == nil {
		t.Error("a negative search_context_cost_per_query was read")
	}
	os.WriteFile(cfgPath, []byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  sonar: {input_usd_per_mtok: 1, output_usd_per_mtok: 1, search_request_usd_per_k: {low: -5}}
`), 0o644)
	if _, err := Load(cfgPath); err == nil || !strings.Contains(err.Error(), "models.sonar.search_request_usd_per_k.low") {
		t.Errorf("a negative search_request_usd_per_k: %v", err)
	}
}

// A size written as 0 in search_request_usd_per_k waives the fee at that
// size (a model that runs no search), and a prices_file's fee does not
// fill it; a size left out is not waived; an unknown key is still refused.
func TestSearchFeeWaived(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prices.json"), []byte(`{
  "local": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06,
    "search_context_cost_per_query": {"search_context_size_low": 0.005, "search_context_size_medium": 0.008, "search_context_size_high": 0.012}}
}`), 0o644)
	cfgPath := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfgPath, []byte(`
prices_file: prices.json
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  local: {search_request_usd_per_k: {low: 0, medium: 0}}
`), 0o644)
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	fees := c.Models["local"].SearchRequestUSDPerK
	if !fees.Waived(0) || !fees.Waived(1) || fees.Waived(2) || fees.Waived(3) || fees.Waived(-1) {
		t.Errorf("waived sizes: %+v (low, medium waived; high not)", fees)
	}
	if fees.Low != 0 || fees.Medium != 0 || fees.High != 12 {
		t.Errorf("fees %+v: want low and medium 0 (waived, not filled from the prices file), high 12 from it", fees)
	}
	os.WriteFile(cfgPath, []byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  local: {input_usd_per_mtok: 1, output_usd_per_mtok: 1, search_request_usd_per_k: {lo: 0}}
`), 0o644)
	if _, err := Load(cfgPath); err == nil || !strings.Contains(err.Error(), "lo") {
		t.Errorf("an unknown size key: %v", err)
	}
}
