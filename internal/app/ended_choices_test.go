package app

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A chat or completions stream with no "[DONE]" and no usage has ended only
// when each of its n choices reported a finish_reason: an upstream that
// repeats choice 0's finish_reason n times, or ends a choice whose index
// the request has not, has not ended it, and the stream is charged input
// plus at least its output reservation (n × 100). Before, finish_reasons
// were counted, not choices, and a legacy completions request's n was
// taken as 1: such streams were charged the few tokens of text they
// showed.
func TestStreamEndsWhenEveryChoiceEnds(t *testing.T) {
	const (
		closed = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
		words  = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello there my friend"},"finish_reason":null}]}` + "\n\n"
		text   = `data: {"id":"c","object":"text_completion","model":"gpt-4o-mini","choices":[{"index":0,"text":"Hello there my friend","finish_reason":null}]}` + "\n\n"
	)
	fin := func(object string, index int) string {
		return fmt.Sprintf(`data: {"id":"c","object":%q,"model":"gpt-4o-mini","choices":[{"index":%d,"delta":{},"text":"","finish_reason":"stop"}]}`+"\n\n", object, index)
	}
	chatFin := func(i int) string { return fin("chat.completion.chunk", i) }
	textFin := func(i int) string { return fin("text_completion", i) }
	up := rawStreamUpstream(t, map[string]string{
		"chat-n2-0-twice":    closed + words + chatFin(0) + chatFin(0),
		"chat-n2-0-and-2":    closed + words + chatFin(0) + chatFin(2),
		"chat-n3-0-1-1":      closed + words + chatFin(0) + chatFin(1) + chatFin(1),
		"chat-n2-0-and-1":    closed + words + chatFin(0) + chatFin(1),
		"compl-n2-one":       closed + text + textFin(0),
		"compl-n2-0-twice":   closed + text + textFin(0) + textFin(0),
		"compl-n2-both":      closed + text + textFin(0) + textFin(1),
		"compl-best3-two":    closed + text + textFin(0) + textFin(1),
		"compl-2prompts-two": closed + text + textFin(0) + textFin(1),
		"compl-2prompts-all": closed + text + textFin(0) + textFin(1) + textFin(2) + textFin(3),
	})
	h := startConfig(t, nil, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`, up, testKey))
	chat := func(n int) string {
		return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"n":%d,"stream":true}`, n)
	}
	const (
		compl2       = `{"model":"gpt-4o-mini","prompt":"hi","max_tokens":100,"n":2,"stream":true}`
		complBest3   = `{"model":"gpt-4o-mini","prompt":"hi","max_tokens":100,"n":2,"best_of":3,"stream":true}`
		compl2Prompt = `{"model":"gpt-4o-mini","prompt":["hi","ho"],"max_tokens":100,"n":2,"stream":true}`
	)
	tokens := func(kind string) float64 {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": kind})
	}
	counted := func(o float64) bool { return o > 0 && o < 20 }
	for i, tc := range []struct {
		name, path, body string
		check            func(out float64) bool
		want             string
	}{
		{"chat-n2-0-twice", "/v1/chat/completions", chat(2), func(o float64) bool { return o == 200 }, "the reservation, 200"},
		{"chat-n2-0-and-2", "/v1/chat/completions", chat(2), func(o float64) bool { return o == 200 }, "the reservation, 200"},
		{"chat-n3-0-1-1", "/v1/chat/completions", chat(3), func(o float64) bool { return o == 300 }, "the reservation, 300"},
		{"chat-n2-0-and-1", "/v1/chat/completions", chat(2), counted, "the text counted"},
		{"compl-n2-one", "/v1/completions", compl2, func(o float64) bool { return o == 200 }, "the reservation, 200"},
		{"compl-n2-0-twice", "/v1/completions", compl2, func(o float64) bool { return o == 200 }, "the reservation, 200"},
		{"compl-n2-both", "/v1/completions", compl2, counted, "the text counted"},
		// best_of candidates are generated (and billed) server-side: a
		// stream that showed fewer ends is not known to have ended.
		{"compl-best3-two", "/v1/completions", complBest3, func(o float64) bool { return o == 300 }, "the reservation, 300"},
		{"compl-2prompts-two", "/v1/completions", compl2Prompt, func(o float64) bool { return o == 400 }, "the reservation, 400"},
		{"compl-2prompts-all", "/v1/completions", compl2Prompt, counted, "the text counted"},
	} {
		in0, out0 := tokens("input"), tokens("output")
		r, body := h.do(tc.path, tc.body, "x-case", tc.name)
		if r.StatusCode != http.StatusOK || !strings.Contains(body, "data:") {
			t.Fatalf("step %d (%s): status %d %.200s, want the stream", i, tc.name, r.StatusCode, body)
		}
		// The bound only ends a failing run.
		if !waitFor(30*time.Second, func() bool { return tokens("input") > in0 }) {
			t.Fatalf("step %d (%s): not settled", i, tc.name)
		}
		if out := tokens("output") - out0; !tc.check(out) {
			t.Errorf("step %d (%s): charged %v output tokens, want %s", i, tc.name, out, tc.want)
		}
	}
}
