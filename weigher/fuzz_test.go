package weigher

import (
	"testing"
)

func FuzzChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":` + cookbookMessages + `}`,
		`{"model":"gpt-4","messages":` + cookbookToolMessages + `,"tools":` + cookbookTools + `,"max_tokens":10,"n":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"high"}}]}]}`,
		`{"model":"o4-mini","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"<|endoftext|>"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`,
		`{"functions":[{"name":"f","parameters":{"properties":{"a":{"type":"object","properties":{"b":{"enum":[1,"x"]}}}}}}]}`,
		`not json`, ``, `[]`, `{"model":1e999,"max_tokens":-1e999}`,
		`{"model":"gpt-4o","prompt":"say \u00e9 <|endoftext|>"}`, `{"model":"gpt-4o","messages":[],"prompt":["a",[1,2],3,{"x":1}]}`,
		`{"model":"gpt-4o","prompt":{"id":"pmpt_1"}}`, `{"model":"gpt-4o","prompt":null,"Prompt":1}`,
		`{"model":"gpt-4o","messages":[],"max_tokens":9,"n":2,"best_of":"3","adapter":{"max_length":70,"system_start":"S"}}`,
		`{"model":"gemini-2.5-pro","messages":[],"extra_body":{"google":{"thinking_config":{"thinking_budget":"24576"}}},"google":{"thinkingConfig":{"thinkingBudget":1e9}},"route":"fallback"}`,
	} {
		f.Add([]byte(s))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		e := w.Chat(body)
		if e.InputTokens < 0 || e.OutputTokens < 0 {
			t.Errorf("negative estimate %+v", e)
		}
		if !e.Parsed && e.InputTokens != int64(len(body)+1)/2 {
			t.Errorf("fallback estimate %+v for %d bytes", e, len(body))
		}
		sameAsPlain(t, KindChat, body)
	})
}

func FuzzParseChatChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}}]}}]}`,
		`{"error":{"message":"x"}}`, `[DONE]`, ``, `{`, `"\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := ParseChatChunk(data)
		if c.Usage.InputTokens < 0 || c.Usage.OutputTokens < 0 || c.Usage.CachedInputTokens < 0 || c.Usage.ReasoningTokens < 0 {
			t.Errorf("negative usage %+v", c.Usage)
		}
		// UsageOnly is the include_usage chunk's shape (empty choices and a
		// usage object), recognised whether or not its figures are
		// readable (parseOpenAIChunk): it carries no text.
		if c.UsageOnly && c.Text != "" {
			t.Errorf("UsageOnly with text: %+v", c)
		}
		if c.Usage.AudioInputTokens < 0 || c.Usage.AudioOutputTokens < 0 {
			t.Errorf("negative audio usage %+v", c.Usage)
		}
		if u, ok := ParseChatUsage(data); !ok && u != (Usage{}) {
			t.Errorf("ParseChatUsage = %+v, false", u)
		}
	})
}
