package weigher

import (
	"encoding/json"
	"os"
	"testing"
)

// TestUpstreamUsageDuplicateMember: an answer naming "usage" twice is read
// by a JSON SDK (encoding/json, Python's json) with the last member; the
// gjson path reader took the first, so an upstream could report a small
// usage first and be charged it while its client is shown (and billed)
// the second. Such an answer must not be read as the smaller usage: it is
// unreadable (the caller keeps its reservation), or read as SDKs read it.
func TestUpstreamUsageDuplicateMember(t *testing.T) {
	body := []byte(`{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":50000,"completion_tokens":40000}}`)
	var sdk struct {
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &sdk); err != nil {
		t.Fatal(err)
	}
	u, ok := ParseChatUsage(body)
	if ok && (u.InputTokens < sdk.Usage.Prompt || u.OutputTokens < sdk.Usage.Completion) {
		t.Errorf("ParseChatUsage: %+v, a JSON SDK reads %+v", u, sdk.Usage)
	}
}

// TestStreamEventUsageDuplicateMember: a Messages stream event naming
// "usage" twice is read by SDKs with the last member; it must not be
// settled as the first, smaller one.
//
// Known, not fixed: stream events (parseObject, then gjson paths such as
// root.Get("usage"), "message.usage", "response.usage", "type") take the
// first of a duplicated member. Run with LLMGUARD_KNOWN_BUGS=1.
func TestStreamEventUsageDuplicateMember(t *testing.T) {
	if os.Getenv("LLMGUARD_KNOWN_BUGS") == "" {
		t.Skip("known: stream events read the first of duplicated members (LLMGUARD_KNOWN_BUGS=1 to run)")
	}
	s, _, _ := feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1},"usage":{"output_tokens":5000}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); u.OutputTokens < 64 {
		t.Errorf("settled %+v (%v): the first of two usage members, SDKs read output_tokens 5000", u, src)
	}
}
