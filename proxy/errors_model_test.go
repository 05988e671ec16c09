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
	e := modelNotPriced(FlavorOpenAI, "", "tenant-usd-hourly", `models.""`)
	if e.openAICode != "model_not_priced" || e.status != 400 {
		t.Errorf("no model: %d %s, want 400 model_not_priced", e.status, e.openAICode)
	}
	if !strings.Contains(e.message, "names no model") || !strings.Contains(e.message, "tenant-usd-hourly") ||
		strings.Contains(e.message, `models.""`) || strings.Contains(e.message, `Model ""`) {
		t.Errorf("no model: message %q", e.message)
	}
	e = modelNotPriced(FlavorOpenAI, "gpt-9", "tenant-usd-hourly", `models."gpt-9"`)
	if !strings.Contains(e.message, `Model "gpt-9" has no price`) || !strings.Contains(e.message, `models."gpt-9"`) ||
		strings.Contains(e.message, "deployment") {
		t.Errorf("gpt-9: message %q", e.message)
	}
}

// An Azure caller's unpriced model is a deployment's name: the message
// names the upstream's deployments map beside models."<name>" (trial16:
// an unmapped deployment was sent to models."other-dep" alone).
func TestModelNotPricedNamesAzureDeployments(t *testing.T) {
	e := modelNotPriced(FlavorAzure, "other-dep", "tenant-usd", `models."other-dep"`)
	if e.openAICode != "model_not_priced" || e.status != 400 || !strings.Contains(e.message, `Model "other-dep" has no price`) ||
		!strings.Contains(e.message, "deployments") || !strings.Contains(e.message, `models."other-dep"`) || !strings.Contains(e.message, "default_price") {
		t.Errorf("azure: %d %s, message %q", e.status, e.openAICode, e.message)
	}
}
