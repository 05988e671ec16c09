package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// Anthropic's Messages path in a config without an anthropic upstream (the
// embedded default before it had one) answers 404 in Anthropic's shape,
// which the Anthropic SDK reads, naming the flavor the config lacks: the
// message is what a caller who pointed the SDK at llmguard sees. An OpenAI
// path through the same proxy is still served by its OpenAI upstream.
func TestNoUpstreamNamesTheMissingFlavor(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	status, _, body, err := r.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		"x-api-key", "sk-panic", "anthropic-version", "2023-06-01")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if status != 404 || got.Type != "error" || got.Error.Type != "not_found_error" {
		t.Errorf("status %d, body %s: want 404 in Anthropic's error shape", status, body)
	}
	if !strings.Contains(got.Error.Message, "flavor: anthropic") {
		t.Errorf("message %q does not name the missing upstream flavor", got.Error.Message)
	}
	// The OpenAI path goes to the (unreachable) OpenAI upstream: 502, not 404.
	if status, _, body, err := r.do("/v1/chat/completions", panicBody); err != nil || status != 502 {
		t.Errorf("/v1/chat/completions: status %d, err %v (%s), want 502 from the unreachable upstream", status, err, body)
	}
}
