package weigher

import (
	"encoding/json"
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

// TestStreamEventUsageDuplicateMember: a Messages or Responses stream event
// naming "usage" (or "type", or a member on the way to the usage) twice is
// read as SDKs read it, with the last member; it must not be settled as the
// first, smaller one.
func TestStreamEventUsageDuplicateMember(t *testing.T) {
	s, _, _ := feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1},"usage":{"output_tokens":5000}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); u.OutputTokens < 64 {
		t.Errorf("settled %+v (%v): the first of two usage members, SDKs read output_tokens 5000", u, src)
	}
	// The type named twice: the last says message_delta, as the SDK reads it.
	s, _, _ = feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"message_delta", `{"type":"ping","type":"message_delta","usage":{"output_tokens":5000}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); u.OutputTokens != 5000 {
		t.Errorf("type named twice: settled %+v (%v), want the message_delta's 5000 output tokens", u, src)
	}
	// Responses: response named twice, the usage of the last.
	s, _, _ = feed(KindResponses, []sseEvent{
		{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":1}},"response":{"usage":{"input_tokens":10,"output_tokens":5000}}}`},
	})
	if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); u.OutputTokens != 5000 {
		t.Errorf("response named twice: settled %+v (%v), want the last usage's 5000 output tokens", u, src)
	}
}
