package app

// Tests of unread37 (2026-12-06): an answer relayed unread (over
// max_response_bytes) whose usage reports a small output beside much text
// was charged that usage (at least the reservation): passingCount stopped
// counting the text once it had found a usage, and never checked the usage
// against the text it had counted. It now checks it as a held answer's is
// (weigher.OutputCheckBytes).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// TestUnread37SmallUsageBesideLongTextChargedTheText: through real sockets,
// answers over max_response_bytes (4 KiB) to a chat request reserving 100
// output tokens, 3,000 words of text each (some 3,000 tokens, 15 KB).
// A usage of 5 output tokens, written before "choices" (read first, the
// text after it), after them, or in an unlabelled stream's chunk before
// the text's, was charged 100 (the reservation); it is charged at least
// the text counted, and no more than its framing adds. An honest usage of
// 2,800 tokens beside the same text (15 KB is under the 17,824 bytes
// 2,800 tokens allow) is charged 2,800, its text not charged in its place.
func TestUnread37SmallUsageBesideLongTextChargedTheText(t *testing.T) {
	text := strings.Repeat("word ", 3000)
	const small = `{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`
	const honest = `{"prompt_tokens":9,"completion_tokens":2800,"total_tokens":2809}`
	choices := `"choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}]`
	head := `{"id":"chatcmpl-x","object":"chat.completion","model":"gpt-5",`
	chunk := func(members string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-5",` + members + "}\n\n"
	}
	delta := func(s string) string { return chunk(`"choices":[{"index":0,"delta":{"content":"` + s + `"}}]`) }
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
	counted := float64(w.CountText("gpt-5", text))
	for _, tc := range []struct {
		name, body string
		// least and most bound the output charged.
		least, most float64
	}{
		{name: "usage first", body: head + `"usage":` + small + `,` + choices + `}`, least: counted, most: counted + 100},
		{name: "usage last", body: head + choices + `,"usage":` + small + `}`, least: counted, most: counted + 100},
		{name: "usage 0 first", body: head + `"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9},` + choices + `}`,
			least: counted, most: counted + 100},
		{name: "stream unlabelled, usage chunk first", body: chunk(`"choices":[],"usage":`+small) +
			delta(text[:5000]) + delta(text[5000:10000]) + delta(text[10000:]) + "data: [DONE]\n\n",
			least: counted, most: counted + 200},
		// The control: an honest usage, first, is the bill.
		{name: "honest usage first", body: head + `"usage":` + honest + `,` + choices + `}`, least: 2800, most: 2800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			h := tier35Harness(t, raw, "max_response_bytes: 4096\n")
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"talk"}],"max_completion_tokens":100}`)
			if resp.StatusCode != 200 || len(b) != len(tc.body) {
				t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(tc.body), b)
			}
			if n := h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "too_large"}); n != 1 {
				t.Fatalf("%v answers relayed unread as too large, want 1: not the path under test", n)
			}
			got := outputSettled(t, h)
			t.Logf("charged %v output tokens (text: %v)", got, counted)
			if got < tc.least || got > tc.most {
				t.Errorf("charged %v output tokens, want %v to %v", got, tc.least, tc.most)
			}
		})
	}
}

// TestUnreadEmbeddingsAnswerChargedItsUsage: an embeddings answer relayed
// unread (over max_response_bytes) reports no output tokens, as every
// embeddings answer does, beside tens of kilobytes of numbers. Its usage
// is its bill: the check of a usage against the answer's text is for
// answers that generate text (a reservation of output tokens), so the
// numbers are not charged as output (they were, some 10,000 tokens, when
// the check asked only for a usage of 0 output tokens).
func TestUnreadEmbeddingsAnswerChargedItsUsage(t *testing.T) {
	vec := strings.TrimSuffix(strings.Repeat("-0.0123456789,", 3000), ",")
	body := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + vec +
		`]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`
	raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	h := tier35Harness(t, raw, "max_response_bytes: 4096\n")
	resp, b := h.do("/v1/embeddings", `{"model":"text-embedding-3-small","input":"five tokens of input here"}`)
	if resp.StatusCode != 200 || len(b) != len(body) {
		t.Fatalf("status %d, %d bytes of %d (%.200s)", resp.StatusCode, len(b), len(body), b)
	}
	if n := h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "too_large"}); n != 1 {
		t.Fatalf("%v answers relayed unread as too large, want 1: not the path under test", n)
	}
	tokens := func(kind string) float64 {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": kind})
	}
	if !waitFor(30*time.Second, func() bool { return tokens("input") > 0 }) {
		t.Fatal("not settled")
	}
	if in, out := tokens("input"), tokens("output"); in != 5 || out != 0 {
		t.Errorf("charged %v input and %v output tokens, want the usage's 5 and 0", in, out)
	}
}
