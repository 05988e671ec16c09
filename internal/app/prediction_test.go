package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// Predicted Outputs bill the prediction's rejected tokens as output, on
// top of what the model writes
// (completion_tokens_details.rejected_prediction_tokens "are still counted
// in the total completion tokens for purposes of billing, output, and
// context window limits", OpenAI's API reference): so the prediction's
// tokens are reserved as output. Here a 2,000-token prediction with
// max_completion_tokens 10 does not fit a 1,000-token bucket; without the
// prediction the request does; and an admitted request with a prediction
// says its reservation in the output maximum it was not allowed to lower
// (no cap_output: a lowered maximum would not bound the rejected tokens).
func TestPredictionReservedAsOutput(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`, mock.URL, testKey))
	prediction := strings.Repeat("func f() { return x + y } ", 250) // ~2,000 tokens
	body := func(pred string) string {
		p := ""
		if pred != "" {
			p = fmt.Sprintf(`"prediction":{"type":"content","content":%q},`, pred)
		}
		return `{"model":"gpt-4o-mini",` + p + `"max_completion_tokens":10,"messages":[{"role":"user","content":"rename x to z"}]}`
	}
	before := mock.Requests.Load()
	resp, got := h.do("/v1/chat/completions", body(prediction), "x-mock-rejected-prediction-tokens", "2000")
	if resp.StatusCode == 200 || mock.Requests.Load() != before {
		t.Errorf("a 2,000-token prediction under a 1,000-token bucket: %d %s, want refused, not forwarded", resp.StatusCode, got)
	}
	// As content parts, the same.
	parts := fmt.Sprintf(`"prediction":{"type":"content","content":[{"type":"text","text":%q}]},`, prediction)
	resp, got = h.do("/v1/chat/completions", strings.Replace(body(""), `"max_completion_tokens"`, parts+`"max_completion_tokens"`, 1))
	if resp.StatusCode == 200 {
		t.Errorf("a 2,000-token prediction in parts: %d %s, want refused", resp.StatusCode, got)
	}
	resp, got = h.do("/v1/chat/completions", body(""))
	if resp.StatusCode != 200 {
		t.Errorf("no prediction: %d %s, want 200", resp.StatusCode, got)
	}

	// Under a cap_output limit the request is refused too, not admitted
	// with a lowered maximum that would leave the prediction unreserved.
	capped := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, cap_output: true, cap_output_min: 16}
`, mock.URL, testKey))
	before = mock.Requests.Load()
	resp, got = capped.do("/v1/chat/completions", body(prediction), "x-mock-rejected-prediction-tokens", "2000")
	if resp.StatusCode == 200 || mock.Requests.Load() != before {
		t.Errorf("cap_output: %d (capped %q) %s, want refused, not forwarded", resp.StatusCode, resp.Header.Get("x-llmguard-output-capped"), got)
	}
}
