package app

// Tests of resp38 (2026-12-06): an answer relayed unread (over
// max_response_bytes) was counted as text whole, so an honest answer whose
// bytes are mostly not output — a chat completion with logprobs, a
// Responses answer echoing long instructions and tools — passed the
// usage check on its bytes and was charged its framing as output. The
// counter now leaves out the members its API defines to hold no output
// (weigher.Kind.AnswerNotOutput); members it does not know still count.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// TestUnread38HonestAnswersChargedTheirUsage: through real sockets,
// answers over max_response_bytes (4 KiB), each with 300 words of text
// (some 300 tokens) and a usage of 300 output tokens beside tens of
// kilobytes that are not output: a chat completion's logprobs (about 60
// bytes a token, five alternatives each), a Responses answer echoing
// 20 KB of instructions and tools. Each was charged thousands of output
// tokens (its bytes counted as text); each is charged its usage. The
// controls: the same bytes under a key in other capitals ("Logprobs",
// which an exact parser reads as a member it does not know) or a member
// no API defines are still counted, as is a usage reporting 5 output
// tokens beside the text (charged the text), and an answer with logprobs
// and no usage is charged its text, not its logprobs.
func TestUnread38HonestAnswersChargedTheirUsage(t *testing.T) {
	words := strings.Repeat("word ", 300)
	var lp strings.Builder
	for i := range 300 {
		if i > 0 {
			lp.WriteByte(',')
		}
		lp.WriteString(`{"token":"word","logprob":-0.01,"bytes":[119,111,114,100],"top_logprobs":[`)
		for j := range 5 {
			if j > 0 {
				lp.WriteByte(',')
			}
			fmt.Fprintf(&lp, `{"token":"w%d","logprob":-%d.5,"bytes":[119,%d]}`, j, j+1, j+48)
		}
		lp.WriteString(`]}`)
	}
	logprobs := `{"content":[` + lp.String() + `],"refusal":null}`
	const usage = `"usage":{"prompt_tokens":9,"completion_tokens":300,"total_tokens":309}`
	const small = `"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`
	chat := func(lpKey, tail string) string {
		return `{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"gpt-5","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"` + words + `","refusal":null},"` + lpKey + `":` + logprobs +
			`,"finish_reason":"stop"}]` + tail + `}`
	}
	long := strings.Repeat(`Answer in the house style, with citations, never in lists. `, 200)
	tools := `[` + strings.Repeat(`{"type":"function","name":"lookup","description":"`+strings.Repeat("Looks a record up. ", 40)+`","parameters":{"type":"object","properties":{"q\u0022x":{"type":"string"}}},"strict":true},`, 8) +
		`{"type":"function","name":"last","parameters":{}}]`
	responses := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5",` +
		`"instructions":"` + long + `","tools":` + tools + `,"text":{"format":{"type":"text"}},"reasoning":{"effort":"low","summary":null},` +
		`"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"` + words + `"}]}],` +
		`"usage":{"input_tokens":9,"output_tokens":300,"total_tokens":309}}`
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 200000}
`)))
	if err != nil {
		t.Fatal(err)
	}
	_, w, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := float64(w.CountText("gpt-5", words))
	chatReq := `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}],"max_completion_tokens":100,"logprobs":true,"top_logprobs":5}`
	respReq := `{"model":"gpt-5","input":"talk","max_output_tokens":100}`
	for _, tc := range []struct {
		name, path, req, body string
		least, most           float64 // bounds of the output charged
	}{
		{name: "chat with logprobs", path: "/v1/chat/completions", req: chatReq, body: chat("logprobs", ","+usage), least: 300, most: 300},
		{name: "chat with logprobs, usage first", path: "/v1/chat/completions", req: chatReq,
			body: strings.Replace(chat("logprobs", ""), `"choices"`, usage+`,"choices"`, 1), least: 300, most: 300},
		{name: "responses echoing instructions and tools", path: "/v1/responses", req: respReq, body: responses, least: 300, most: 300},
		{name: "escaped key", path: "/v1/chat/completions", req: chatReq, body: chat(`log\u0070robs`, ","+usage), least: 300, most: 300},
		// Controls: output may be where no API defines it, and a usage
		// its text contradicts is charged the text.
		{name: "key in capitals is counted", path: "/v1/chat/completions", req: chatReq, body: chat("Logprobs", ","+usage), least: 2000, most: 1e9},
		{name: "unknown member is counted", path: "/v1/chat/completions", req: chatReq, body: chat("extra", ","+usage), least: 2000, most: 1e9},
		{name: "small usage beside the text", path: "/v1/chat/completions", req: chatReq, body: chat("logprobs", ","+small), least: text, most: text + 60},
		{name: "no usage: the text", path: "/v1/chat/completions", req: chatReq, body: chat("logprobs", ""), least: text, most: text + 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			h := tier35Harness(t, raw, "max_response_bytes: 4096\n")
			resp, b := h.do(tc.path, tc.req)
			if resp.StatusCode != 200 || len(b) != len(tc.body) {
				t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(tc.body), b)
			}
			if n := h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "too_large"}); n != 1 {
				t.Fatalf("%v answers relayed unread as too large, want 1: not the path under test", n)
			}
			got := outputSettled(t, h)
			t.Logf("charged %v output tokens (%d bytes; text %v)", got, len(tc.body), text)
			if got < tc.least || got > tc.most {
				t.Errorf("charged %v output tokens, want %v to %v", got, tc.least, tc.most)
			}
		})
	}
}
