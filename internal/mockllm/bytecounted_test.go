package mockllm

import (
	"strconv"
	"strings"
	"testing"
)

// TestByteCountedChat: with Options.ByteCountedChat a chat answer reports
// len(body)/4 prompt tokens, and still follows the body's model, output
// limit and stream options.
func TestByteCountedChat(t *testing.T) {
	s, err := StartWith("127.0.0.1:0", Options{ByteCountedChat: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("word ", 100) + `"}],"max_completion_tokens":3}`
	var r struct {
		Model string `json:"model"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	decode(t, post(t, s, "/v1/chat/completions", body, nil), &r)
	if r.Model != "gpt-4o" || r.Usage.PromptTokens != int64(len(body)/4) || r.Usage.CompletionTokens != 3 {
		t.Errorf("model %q, usage %+v; want gpt-4o, prompt %d, completion 3", r.Model, r.Usage, len(body)/4)
	}
	stream := strings.Replace(body, `"max_completion_tokens":3`, `"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}`, 1)
	got := post(t, s, "/v1/chat/completions", stream, nil)
	want := `"usage":{"prompt_tokens":` + strconv.Itoa(len(stream)/4) + `,"completion_tokens":2,`
	if got.status != 200 || !strings.Contains(string(got.body), want) || !strings.HasSuffix(string(got.body), "data: [DONE]\n\n") {
		t.Errorf("stream %d: %s\nwant %s", got.status, got.body, want)
	}
}
