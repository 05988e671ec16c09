package app

// Adversarial tests of adv47 (2026-12-07): holes left open by adv44–adv46
// (OpenRouter's provider routing priced at the table's price, the unread
// and held error paths judging output differently, error settlement
// parsing a body more than once) and new ones. Each drives llmguard
// through loopback sockets to an upstream the test sets.

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// adv47USDCost is what alice's dollar bucket (user-usd, $100) lost, in
// micro-USD, for one call of body to path whose upstream answers status
// with answer (contentType) as written.
func adv47USDCost(t *testing.T, status int, contentType, answer, path, body string) int64 {
	t.Helper()
	url := startRawUpstream(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", status, contentType, len(answer), answer)
	})
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + "limits:\n" + usdLimit + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := rateLimitRemaining(t, h.probe(), "user-usd")
	resp, got := h.do(path, body)
	// (A stream's usage chunk, which llmguard asked for on the client's
	// behalf, is dropped: the rest is relayed.)
	if resp.StatusCode != status || contentType != "text/event-stream" && got != answer {
		t.Fatalf("status %d, want the upstream's %d; answer relayed whole: %v", resp.StatusCode, status, got == answer)
	}
	return left - rateLimitRemaining(t, h.probe(), "user-usd")
}

// OpenRouter routes a model to one of its providers, and a request's
// provider object (order, only, ignore, sort by throughput or latency,
// quantizations…) or a fallback may pick one dearer than the price the
// table holds for the model; its answer's usage.cost (credits = USD) is
// what it billed (https://openrouter.ai/docs/use-cases/usage-accounting).
// llmguard priced the tokens at the table's price alone: a call OpenRouter
// billed $0.25 cost the budget 8 µUSD. It is now charged the larger of
// the two; with is_byok, OpenRouter's fee plus the upstream cost the
// caller's own provider key paid.
func TestAdv47OpenRouterReportedCostIsCharged(t *testing.T) {
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"provider":{"order":["dear"],"allow_fallbacks":false}}`
	const streamBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true,"provider":{"sort":"throughput"}}`
	answer := func(usage string) string {
		return `{"id":"gen-1","object":"chat.completion","model":"openai/gpt-4o-mini","provider":"Dear","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}],"usage":` + usage + `}`
	}
	stream := func(usage string) string {
		return `data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there, friend."},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"gen-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"gen-1","object":"chat.completion.chunk","choices":[],"usage":` + usage + `}` + "\n\ndata: [DONE]\n\n"
	}
	// gpt-4o-mini at the table's price: 8 input tokens at 0.15 and 5
	// output at 0.60 USD a million, 5 µUSD (rounded up).
	const table = (8*150_000 + 5*600_000 + 999_999) / 1_000_000
	for _, tc := range []struct {
		name        string
		body        string
		stream      bool
		usage       string
		least, most int64 // micro-USD the bucket must lose
	}{
		{"JSON, a dear provider's cost", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13,"cost":0.25,"is_byok":false,"cost_details":{"upstream_inference_cost":null}}`, 250_000, 250_000},
		{"stream, a dear provider's cost", streamBody, true, `{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13,"cost":0.25}`, 250_000, 250_000},
		{"JSON, BYOK: the fee and the upstream cost", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13,"cost":0.0125,"is_byok":true,"cost_details":{"upstream_inference_cost":0.25}}`, 262_500, 262_500},
		{"JSON, a cost as a numeric string", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5,"cost":"0.000123"}`, 123, 123},
		// A cost below the table's price, none, or not a positive number:
		// the table's price, as before.
		{"JSON, a cheap provider's cost", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5,"cost":0.000001}`, table, table},
		{"JSON, no cost", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5}`, table, table},
		{"JSON, a negative cost", chatBody, false, `{"prompt_tokens":8,"completion_tokens":5,"cost":-5}`, table, table},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, a := "application/json", answer(tc.usage)
			if tc.stream {
				ct, a = "text/event-stream", stream(tc.usage)
			}
			got := adv47USDCost(t, 200, ct, a, "/v1/chat/completions", tc.body)
			t.Logf("charged %d µUSD", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the dollar bucket lost %d µUSD, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// A large answer under an error status, held to be read (within
// max_response_bytes), is read for its usage (Weigher.ParseUsage: a flat
// check, then the checked reader when the check cannot decide), then,
// with none, for the output it carries (Weigher.AnswerOutputTokens) and
// the tier it names (AnswerServedTier): up to three passes over it. The
// passes allocate nothing but the text count, made once: what such an
// answer's request allocates is within a quarter (and 1 MiB) of what the
// same answer's request allocates under 200, and within 6× the answer
// (the held buffer's growth, under twice its size; its text unescaped
// and counted), whatever its shape — an error body, an answer whose text
// is its output, one that is not JSON.
func TestAdv47LargeErrorAnswerSettledWithinItsSize(t *testing.T) {
	const text = 24 << 20
	filler := strings.Repeat("word \\n ", text/8)
	for _, tc := range []struct {
		name, answer string
		charged      bool // output charged under 500 (else refunded)
	}{
		{"error body", `{"error":{"message":"` + filler + `","type":"server_error"}}`, false},
		{"chat text", `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + filler + `"}}]}`, true},
		{"chat text and usage", `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + filler + `"}}],"usage":{"prompt_tokens":8,"completion_tokens":3}}`, true},
		{"not JSON", `<html><body>` + filler + `</body></html>`, false},
		{"invalid JSON", `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + filler + `"}}],}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var alloc [2]uint64
			for i, status := range []int{200, 500} {
				url := startRawUpstream(t, func(c net.Conn) {
					fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, len(tc.answer), tc.answer)
				})
				h := startTransport(t, nil, transportYAML(url, "", "", slowTPM), nil)
				runtime.GC()
				before := allocatedBytes()
				if got, n, err := postDiscarding(t, h); got != status || err != nil || n != int64(len(tc.answer)) {
					t.Fatalf("status %d, %d of %d bytes, err %v", got, n, len(tc.answer), err)
				}
				alloc[i] = allocatedBytes() - before
				if out := h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}); status == 500 && (out > 0) != tc.charged {
					t.Errorf("under 500, output charged %v tokens, want charged: %v", out, tc.charged)
				}
			}
			t.Logf("the request allocated %d MiB under 200, %d MiB under 500, for a %d MiB answer", alloc[0]>>20, alloc[1]>>20, len(tc.answer)>>20)
			if bound := alloc[0] + alloc[0]/4 + 1<<20; alloc[1] > bound {
				t.Errorf("under 500 the request allocated %d MiB, want at most %d MiB (its allocation under 200, %d MiB, and a quarter)", alloc[1]>>20, bound>>20, alloc[0]>>20)
			}
			if bound := uint64(6 * len(tc.answer)); alloc[1] > bound {
				t.Errorf("under 500 the request allocated %d MiB for a %d MiB answer, want at most %d MiB (6× the answer)", alloc[1]>>20, len(tc.answer)>>20, bound>>20)
			}
		})
	}
}

// An SSE stream answering a stream request under an error status, not
// labelled text/event-stream (so held, or relayed unread when over
// max_response_bytes or finding no room), was judged by two criteria:
// held, read by the usage tap and refunded when it carried no output (an
// error event alone); unread, charged its reservation whatever it held,
// as any SSE body was taken for output (adv45). The unread one is now
// read by the same tap as it passes and settled as the held one is: an
// error event alone, however long, is refunded; a stream that carried
// text is charged it, under either path.
func TestAdv47ErrorStatusStreamOneCriterion(t *testing.T) {
	long := strings.Repeat("overloaded ", 600) // 6.6 KB: past max_response_bytes
	words := strings.TrimSpace(strings.Repeat("word ", 2000))
	chatErr := func(msg string) string {
		return fmt.Sprintf(`data: {"error":{"message":%q,"type":"server_error","param":null,"code":null}}`, msg) + "\n\ndata: [DONE]\n\n"
	}
	msgsErr := func(msg string) string {
		return fmt.Sprintf("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":%q}}\n\n", msg)
	}
	chatText := fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":"stop"}]}`, words) + "\n\ndata: [DONE]\n\n"
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`
	const msgsBody = `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`
	for _, tc := range []struct {
		name        string
		path, body  string
		answer      string
		least, most int64 // tokens the bucket must lose
	}{
		{"chat error event", "/v1/chat/completions", chatBody, chatErr(long), 0, 0},
		{"chat short error event", "/v1/chat/completions", chatBody, chatErr("overloaded"), 0, 0},
		{"messages error event", "/v1/messages", msgsBody, msgsErr(long), 0, 0},
		{"chat text", "/v1/chat/completions", chatBody, chatText, 8 + 2000, 8 + 2060},
	} {
		for _, path := range []struct{ name, extra string }{{"held", ""}, {"unread", "max_response_bytes: 4096\n"}} {
			if path.extra != "" && len(tc.answer) <= 4096 {
				continue // held whatever the limit
			}
			t.Run(tc.name+", "+path.name, func(t *testing.T) {
				var headers []string
				if tc.path == "/v1/messages" {
					headers = []string{"anthropic-version", "2023-06-01"}
				}
				got := adv45StatusCost(t, path.extra, 500, "application/json", tc.answer, tc.path, tc.body, headers...)
				t.Logf("charged %d tokens", got)
				if got < tc.least || got > tc.most {
					t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.most)
				}
			})
		}
	}
}
