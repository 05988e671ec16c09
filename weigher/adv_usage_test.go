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
// (a usage, a figure, a type, a member on the way to the usage) is read by
// the caller's SDK with the last member, by a first-match reader with the
// first: the upstream may have billed either. llmguard reads it both ways
// and settles at the dearer reading (stream_dupkey.go), never below what
// either reports (here 5000 output tokens against a reservation of 64);
// readings that disagree on whether the event reports a usage leave it
// Unread, so the proxy charges at least the output reservation too.
// (Before, every such event was Unread and its usage dropped: the stream
// settled at its reservation, below either reading.) Through real sockets:
// TestStreamDuplicateKeySettlesAtTheDearerReading in package proxy.
func TestStreamEventUsageDuplicateMember(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kind       Kind
		events     []sseEvent
		wantOutput int64 // the dearer reading's output
		wantText   string
		unread     bool // an update must be Unread (the readings disagree)
	}{
		{"messages usage named twice", KindMessages, []sseEvent{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1},"usage":{"output_tokens":5000}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}, 5000, "", false},
		{"messages dearer usage first", KindMessages, []sseEvent{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":5000},"usage":{"output_tokens":1}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}, 5000, "", false},
		{"messages type named twice", KindMessages, []sseEvent{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"message_delta", `{"type":"ping","type":"message_delta","usage":{"output_tokens":5000}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}, 5000, "", true},
		{"responses response named twice", KindResponses, []sseEvent{
			{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":1}},"response":{"usage":{"input_tokens":10,"output_tokens":5000}}}`},
		}, 5000, "", false},
		{"chat usage named twice", KindChat, []sseEvent{
			{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1},"usage":{"prompt_tokens":10,"completion_tokens":5000}}`},
			{"", `[DONE]`},
		}, 5000, "", false},
		{"chat figure named twice", KindChat, []sseEvent{
			{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5000,"completion_tokens":1}}`},
			{"", `[DONE]`},
		}, 5000, "", false},
		{"chat usage then null", KindChat, []sseEvent{
			{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5000},"usage":null}`},
			{"", `[DONE]`},
		}, 5000, "", true},
		{"chat content named twice", KindChat, []sseEvent{
			{"", `{"choices":[{"delta":{"content":"a","content":"a much longer text"}}]}`},
			{"", `[DONE]`},
		}, 0, "a much longer text", false},
	} {
		s, text, ups := feed(tc.kind, tc.events)
		unread := false
		for _, u := range ups {
			unread = unread || u.Unread
		}
		if unread != tc.unread {
			t.Errorf("%s: an update Unread: %v, want %v (%+v)", tc.name, unread, tc.unread, ups)
		}
		if text != tc.wantText {
			t.Errorf("%s: text %q, want %q", tc.name, text, tc.wantText)
		}
		if u, _ := s.Settle(Estimate{InputTokens: 10, OutputTokens: 64}, 0); u.OutputTokens < tc.wantOutput || u.InputTokens < 10 {
			t.Errorf("%s: settled %+v, want at least 10 input and %d output tokens", tc.name, u, tc.wantOutput)
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
