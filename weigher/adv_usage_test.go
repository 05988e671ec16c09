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

// TestStreamEventUsageDuplicateMember: a stream event naming a key twice
// (a usage, a type, a member on the way to the usage) is read by the
// caller's SDK with the last member, by a first-match reader with the
// first: llmguard reads neither. The event is Unread, its usage is not
// taken, and a Messages usage read elsewhere is then not final (the unread
// event may have been a message_delta with a larger count), so the proxy
// charges at least the output reservation (TestStreamsLlmguardCannotRead
// KeepTheirCharge checks that end to end).
func TestStreamEventUsageDuplicateMember(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   Kind
		events []sseEvent
	}{
		{"messages usage named twice", KindMessages, []sseEvent{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1},"usage":{"output_tokens":5000}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}},
		{"messages type named twice", KindMessages, []sseEvent{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"message_delta", `{"type":"ping","type":"message_delta","usage":{"output_tokens":5000}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}},
		{"responses response named twice", KindResponses, []sseEvent{
			{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":1}},"response":{"usage":{"input_tokens":10,"output_tokens":5000}}}`},
		}},
		{"chat usage named twice", KindChat, []sseEvent{
			{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1},"usage":{"prompt_tokens":10,"completion_tokens":5000}}`},
			{"", `[DONE]`},
		}},
		{"chat content named twice", KindChat, []sseEvent{
			{"", `{"choices":[{"delta":{"content":"a","content":"a much longer text"}}]}`},
			{"", `[DONE]`},
		}},
	} {
		s, _, ups := feed(tc.kind, tc.events)
		unread := false
		for _, u := range ups {
			unread = unread || u.Unread
			if u.Unread && u != (StreamUpdate{Unread: true}) {
				t.Errorf("%s: an unread event said more: %+v", tc.name, u)
			}
		}
		if !unread {
			t.Errorf("%s: no event was Unread", tc.name)
		}
		if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); src == SourceReported {
			t.Errorf("%s: settled %+v as reported: a usage named twice was taken", tc.name, u)
		}
	}
	// The same streams without the duplicate are read and final.
	s, _, _ := feed(KindMessages, []sseEvent{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":5000}}`},
		{"message_stop", `{"type":"message_stop"}`},
	})
	if u, src := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); src != SourceReported || u.OutputTokens != 5000 {
		t.Errorf("messages without a duplicate: settled %+v (%v), want 5000 output tokens reported", u, src)
	}
}
