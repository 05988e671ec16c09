package proxy

import (
	"strings"
	"testing"
)

// A request that names no model gets a model_not_priced message that says
// so and asks the caller for the model, not `Model "" has no price` and a
// config key `models.""` for the operator (new-user trial: a body without
// "model" under the embedded default's usd limit).
func TestModelNotPricedNamesNoModel(t *testing.T) {
	e := modelNotPriced("", "tenant-usd-hourly", `models.""`)
	if e.openAICode != "model_not_priced" || e.status != 400 {
		t.Errorf("no model: %d %s, want 400 model_not_priced", e.status, e.openAICode)
	}
	if !strings.Contains(e.message, "names no model") || !strings.Contains(e.message, "tenant-usd-hourly") ||
		strings.Contains(e.message, `models.""`) || strings.Contains(e.message, `Model ""`) {
		t.Errorf("no model: message %q", e.message)
	}
	e = modelNotPriced("gpt-9", "tenant-usd-hourly", `models."gpt-9"`)
	if !strings.Contains(e.message, `Model "gpt-9" has no price`) || !strings.Contains(e.message, `models."gpt-9"`) {
		t.Errorf("gpt-9: message %q", e.message)
	}
}
