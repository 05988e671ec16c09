//go:build !nativetest

package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/spec"
)

// Through a real socket, a usd limit refuses a model without a price with
// 400 model_not_priced in the caller's flavor, naming the model and the
// config key that prices it; nothing reaches the upstream, nothing is
// charged or recorded. A token limit alone lets the same model through,
// and default_price prices it.
func TestModelNotPricedThroughTheSocket(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf("  - {name: acme-dollars, scope: tenant, unit: usd, quota: 10, period: month, models: [\"*\"]}\nledger: {file: %q}\n", file))
	before := h.mock.Requests.Load()

	// The OpenAI SDK sees an openai.Error it does not retry.
	c := h.client(testKey, option.WithMaxRetries(2))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-9-ultra",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("err = %v, want openai.Error 400", err)
	}
	if apiErr.Code != "model_not_priced" || apiErr.Type != "invalid_request_error" ||
		!strings.Contains(apiErr.Message, `"gpt-9-ultra"`) || !strings.Contains(apiErr.Message, `models."gpt-9-ultra"`) ||
		!strings.Contains(apiErr.Message, "acme-dollars") || !strings.Contains(apiErr.Message, "default_price") {
		t.Errorf("error = code %q type %q message %q", apiErr.Code, apiErr.Type, apiErr.Message)
	}
	// A name that merely starts with a priced one is not priced as it.
	resp, body := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini-pro","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":"model_not_priced"`) {
		t.Errorf("gpt-4o-mini-pro: %d %s, want 400 model_not_priced", resp.StatusCode, body)
	}
	// A priority request for a model without priority prices names the
	// priority key.
	resp, body = h.do("/v1/chat/completions", `{"model":"gpt-5-nano","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `models.\"gpt-5-nano\".priority`) {
		t.Errorf("priority gpt-5-nano: %d %s, want 400 naming models.\"gpt-5-nano\".priority", resp.StatusCode, body)
	}
	// The Anthropic SDK sees its own error shape.
	ac := h.anthropicClient(aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-house-special", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var aErr *anthropic.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != http.StatusBadRequest || !strings.Contains(aErr.Error(), "invalid_request_error") ||
		!strings.Contains(aErr.Error(), "claude-house-special") {
		t.Errorf("anthropic err = %v, want 400 invalid_request_error naming the model", err)
	}
	if n := h.mock.Requests.Load() - before; n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	if m := h.metrics(); !strings.Contains(m, `{flavor="openai",limit="acme-dollars",model="other",outcome="invalid"} 2`) ||
		!strings.Contains(m, `{flavor="anthropic",limit="acme-dollars",model="other",outcome="invalid"} 1`) ||
		!strings.Contains(m, `limit="acme-dollars",model="gpt-5-nano",outcome="invalid"} 1`) {
		t.Errorf("the refusals are not counted as invalid (unpriced models labelled other):\n%s", m)
	}
	// The model as priced passes and is recorded as sent.
	resp, _ = h.do("/v1/chat/completions", `{"model":"gpt-4o-mini-2024-07-18","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
	if resp.StatusCode != 200 {
		t.Fatalf("a dated snapshot of a priced model: %d", resp.StatusCode)
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Model != "gpt-4o-mini-2024-07-18" {
		t.Errorf("ledger %+v, want one record, of the snapshot as sent", recs)
	}

	// No usd limit: the unpriced model is served (tokens are still counted).
	free := startFlavors(t, "")
	if resp, body := free.do("/v1/chat/completions", `{"model":"gpt-9-ultra","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`); resp.StatusCode != 200 {
		t.Errorf("no usd limit: %d %s, want 200", resp.StatusCode, body)
	}
}

// default_price prices the models without a price: the usd limit admits
// them and charges usage × the default price to the micro-dollar.
func TestDefaultPriceThroughTheSocket(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-dollars, scope: tenant, unit: usd, quota: 10, period: month}
default_price: {input_usd_per_mtok: 50, output_usd_per_mtok: 200}
ledger: {file: %q}
`, file))
	resp, body := h.do("/v1/chat/completions", `{"model":"local/llama-3.3-70b","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`,
		"x-mock-completion-tokens", "20")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ledger %+v, %v", recs, err)
	}
	// $50 and $200 per million tokens are 50 and 200 µUSD per token.
	if r := recs[0]; r.OutputTokens != 20 || r.Model != "local/llama-3.3-70b" || r.CostMicroUSD != r.InputTokens*50+r.OutputTokens*200 {
		t.Errorf("record %+v: want 20 output tokens and input × 50 + output × 200 µUSD", r)
	}
}

// service_tier is priced: a priority request costs priority prices in the
// ledger, a flex one flex prices, each to the micro-dollar.
func TestServiceTierPricedThroughTheSocket(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startFlavors(t, fmt.Sprintf("  - {name: acme-dollars, scope: tenant, unit: usd, quota: 10, period: month}\nledger: {file: %q}\n", file))
	for _, tier := range []string{"priority", "flex", "default"} {
		resp, body := h.do("/v1/chat/completions", `{"model":"gpt-5","service_tier":"`+tier+`","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`,
			"x-mock-completion-tokens", "20")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tier, resp.StatusCode, body)
		}
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil || len(recs) != 3 {
		t.Fatalf("ledger %+v, %v", recs, err)
	}
	pol := h.app.policy()
	for i, tier := range []string{"priority", "flex", "default"} {
		r := recs[i]
		q := pol.Quote("gpt-5", tier)
		want := q.Price.MicroUSD(spec.Usage{InputTokens: r.InputTokens, CachedInputTokens: r.CachedInputTokens, OutputTokens: r.OutputTokens})
		if r.CostMicroUSD != want || r.OutputTokens != 20 {
			t.Errorf("%s: %+v cost %d µUSD, want %d", tier, r, r.CostMicroUSD, want)
		}
	}
	if !(recs[0].CostMicroUSD > recs[2].CostMicroUSD && recs[2].CostMicroUSD > recs[1].CostMicroUSD) {
		t.Errorf("costs priority %d, default %d, flex %d: want priority > default > flex",
			recs[0].CostMicroUSD, recs[2].CostMicroUSD, recs[1].CostMicroUSD)
	}
}

// A `models: ["*"]` limit holds slashed model names: a provider prefix
// does not escape it.
func TestModelGlobsMatchSlashedNamesThroughTheSocket(t *testing.T) {
	h := startFlavors(t, `  - {name: any-model, scope: user, unit: requests, rate: 1, per: 24h, burst: 1, models: ["*"]}
`)
	for i, step := range []struct {
		model string
		want  int
	}{
		{"openai/gpt-4o", 200},
		{"meta-llama/Llama-3.3-70B-Instruct", 429}, // the one bucket of "*" is spent
		{"gpt-4o-mini", 429},
	} {
		resp, _ := h.do("/v1/chat/completions", `{"model":"`+step.model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		if resp.StatusCode != step.want {
			t.Errorf("step %d (%s): %d, want %d", i, step.model, resp.StatusCode, step.want)
		}
	}
}

// per_model keeps a bucket per priced model: through the socket, spending
// one model's bucket leaves another's whole; a dated snapshot shares its
// model's bucket, and every unpriced name shares one.
func TestPerModelBucketsThroughTheSocket(t *testing.T) {
	h := startFlavors(t, `  - {name: per-model, scope: user, unit: requests, rate: 1, per: 24h, burst: 1, models: ["*"], per_model: true}
`)
	for i, step := range []struct {
		model string
		want  int
	}{
		{"gpt-4o-mini", 200},
		{"gpt-4o-mini", 429},
		{"gpt-4o-mini-2024-07-18", 429},
		{"claude-sonnet-4-5", 200},
		{"openai/gpt-4o", 200},
		{"meta-llama/Llama-3.3-70B-Instruct", 429},
		{"made-up-model", 429},
	} {
		resp, _ := h.do("/v1/chat/completions", `{"model":"`+step.model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		if resp.StatusCode != step.want {
			t.Errorf("step %d (%s): %d, want %d", i, step.model, resp.StatusCode, step.want)
		}
	}
}

// /admin/usage lists a per_model quota's buckets that have spend, one per
// model, the unpriced models' together.
func TestUsageListsPerModelQuotaBuckets(t *testing.T) {
	h := startFlavors(t, `  - {name: daily-per-model, scope: user, unit: requests, quota: 100, period: day, per_model: true}
`)
	for _, model := range []string{"gpt-4o-mini", "gpt-4o-mini-2024-07-18", "claude-sonnet-4-5", "made-up-model"} {
		if resp, body := h.do("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
		}
	}
	rep, err := h.app.Usage(context.Background(), "acme", "day")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, q := range rep.Quotas {
		if q.Limit == "daily-per-model" {
			used[q.Model] = q.Used
		}
	}
	want := map[string]int64{"gpt-4o-mini": 2, "claude-sonnet-4-5": 1, "%unpriced": 1}
	if fmt.Sprint(used) != fmt.Sprint(want) {
		t.Errorf("per-model quota buckets %v, want %v", used, want)
	}
}
