package app

// Adversarial tests of adv29 (2026-12-06): the upstream side. Each drives
// llmguard through loopback sockets to a raw upstream that writes its
// answer byte for byte and then closes the connection.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAdv29CutAnswerChargesItsText: a non-streamed chat answer of 3,000
// words whose upstream stopped before the end of its JSON value (before
// its usage, or after a usage placed first) was charged the 256-token
// default reservation: relayed (200) when its body was close-delimited
// (HTTP/1.0, or HTTP/1.1 with neither Content-Length nor chunked coding),
// lost (502) when its Content-Length promised more or its chunked body
// never sent its last chunk. The upstream generated the 3,000 words it
// sent, and bills them: the body that came is charged as text, or the
// output of a usage it holds (written first) when that says more. A cut
// answer holding less text than the reservation keeps the reservation; a
// cut answer under an error status stays refunded; a 200 body that is not
// JSON (a proxy's HTML page) is not counted.
func TestAdv29CutAnswerChargesItsText(t *testing.T) {
	answer := func(words string, usageFirst bool) string {
		usage := `"usage":{"prompt_tokens":9,"completion_tokens":3000,"total_tokens":3009}`
		choices := fmt.Sprintf(`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]`, words)
		if usageFirst {
			return `{"id":"x","object":"chat.completion","model":"x",` + usage + "," + choices + "}"
		}
		return `{"id":"x","object":"chat.completion","model":"x",` + choices + "," + usage + "}"
	}
	whole := answer(words16, false)
	cut := whole[:len(whole)-120] // inside the usage object
	usageFirst := answer(words16, true)
	cutFirst := usageFirst[:len(usageFirst)-40] // inside the text
	usageFirstShort := answer("a few words", true)
	usageFirstShort = strings.Replace(usageFirstShort[:len(usageFirstShort)-40], `"completion_tokens":3000`, `"completion_tokens":5000`, 1)
	short := answer("just a few words", false)
	shortCut := short[:len(short)-120]
	const ct = "Content-Type: application/json\r\n"
	for _, tc := range []struct {
		name     string
		raw      string
		status   int
		min, max float64 // output tokens charged
	}{
		{"HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n" + ct + "\r\n" + cut, 200, 3000, 3100},
		{"HTTP/1.1 close-delimited", "HTTP/1.1 200 OK\r\n" + ct + "Connection: close\r\n\r\n" + cut, 200, 3000, 3100},
		{"HTTP/1.0 usage first", "HTTP/1.0 200 OK\r\n" + ct + "\r\n" + cutFirst, 200, 3000, 3100},
		{"Content-Length longer than the body", fmt.Sprintf("HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s", ct, len(whole), cut), 502, 3000, 3100},
		{"chunked without its last chunk", fmt.Sprintf("HTTP/1.1 200 OK\r\n%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", ct, len(cut), cut), 502, 3000, 3100},
		{"chunked usage first without its last chunk", fmt.Sprintf("HTTP/1.1 200 OK\r\n%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", ct, len(cutFirst), cutFirst), 502, 3000, 3100},
		{"HTTP/1.0 usage first, little text", "HTTP/1.0 200 OK\r\n" + ct + "\r\n" + usageFirstShort, 200, 5000, 5000},
		{"short text cut keeps the reservation", "HTTP/1.0 200 OK\r\n" + ct + "\r\n" + shortCut, 200, 256, 256},
		{"error status cut stays refunded", fmt.Sprintf("HTTP/1.1 500 Oops\r\n%sContent-Length: %d\r\n\r\n%s", ct, len(whole), cut), 502, 0, 0},
		{"HTML page keeps the reservation", "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>" + words16 + "</html>", 200, 256, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, rawStreamUpstream(t, map[string]string{"": tc.raw}))
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"talk"}]}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%.200s), want %d", resp.StatusCode, b, tc.status)
			}
			var got float64
			if tc.max == 0 {
				// A refund charges nothing: wait for the settled input
				// (refunded, 0) through the request count instead.
				if !waitFor(30*time.Second, func() bool { return h.scrape()["llmguard_requests_total"].sum(nil) > 0 }) {
					t.Fatal("not counted")
				}
				got = h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"})
			} else {
				got = outputSettled(t, h)
			}
			if got < tc.min || got > tc.max {
				t.Errorf("charged %v output tokens, want %v to %v", got, tc.min, tc.max)
			}
		})
	}
}
