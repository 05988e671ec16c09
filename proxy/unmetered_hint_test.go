package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/policy"
)

// A refused path gets "did you mean" only when it looks like a typo of an
// endpoint llmguard weighs, not when it is a resource below one: trial21's
// Anthropic SDK messages.batches.create() was told "did you mean
// /v1/messages?", as if /v1/messages/batches were a misspelling.
func TestUnmeteredHintSkipsSubresources(t *testing.T) {
	r := &policy.Rule{Name: "user-tokens", Unit: policy.UnitTokens}
	for _, tc := range []struct {
		path string
		hint string // "" when no "did you mean" is wanted
	}{
		{path: "/v1/chat/completion", hint: "did you mean /v1/chat/completions?"},
		{path: "/v1/embedding", hint: "did you mean /v1/embeddings?"},
		{path: "/v1/chat", hint: "did you mean /v1/chat/completions?"},
		{path: "/v1/messagesx", hint: "did you mean /v1/messages?"},
		{path: "/v1/messages/batches"},
		{path: "/v1/messages/batches/msgbatch_1/results"},
		{path: "/V1/Messages/batches"},
		{path: "/v1/batches"},
	} {
		msg := unmetered(tc.path, r).message
		switch {
		case tc.hint == "" && strings.Contains(msg, "did you mean"):
			t.Errorf("%s: %q, want no hint: it is a resource, not a typo", tc.path, msg)
		case tc.hint == "" && !strings.Contains(msg, "unmetered_paths"):
			t.Errorf("%s: %q, want the way to allow it (unmetered_paths)", tc.path, msg)
		case tc.hint != "" && !strings.Contains(msg, tc.hint):
			t.Errorf("%s: %q, want %q", tc.path, msg, tc.hint)
		}
	}
}
