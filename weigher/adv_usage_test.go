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
