package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// An upstream answer whose framing is ambiguous (RFC 9112 §6.3: both
// Content-Length and chunked, two lengths, an unknown or doubled coding,
// an obs-fold inside Content-Length) is read by its chunked framing when
// it has one, and is otherwise llmguard's 502 with the reservation kept;
// an answer cut by its Content-Length is settled at the reservation (its
// usage unread), and no answer carries another's bytes. A probe of the
// adversarial round of 2026-12-05 that held, kept as a test.
func TestUpstreamAnswerFramingHeld(t *testing.T) {
	body := `{"id":"first","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5000}}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	const chunkedUsage, reservation = 5003, 59 // 3 + 5,000 reported; 9 input + 50 max_tokens
	for _, tc := range []struct {
		name, answer string
		status       int
		spent        int64
	}{
		{"length then chunked", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, 200, chunkedUsage},
		{"chunked then length", head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked, 200, chunkedUsage},
		{"two lengths", head + "Content-Length: 5\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body, 502, reservation},
		{"short length", head + "Content-Length: 20\r\n\r\n" + body, 200, reservation},
		{"identity, chunked", head + "Transfer-Encoding: identity, chunked\r\n\r\n" + chunked, 502, reservation},
		{"chunked, identity", head + "Transfer-Encoding: chunked, identity\r\nContent-Length: 5\r\n\r\n" + chunked, 502, reservation},
		{"unknown coding", head + "Transfer-Encoding: xchunked\r\nContent-Length: 5\r\n\r\n" + chunked, 502, reservation},
		{"obs-fold length", head + "Content-Length: 5\r\n 0\r\n\r\n" + body, 502, reservation},
	} {
		up := startRawUpstream(t, tc.answer)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
		for i := range 2 { // the second on the pooled connection, when it was kept
			before := r.remaining()
			status, _, got, err := r.do("/v1/chat/completions", panicBody)
			if err != nil || status != tc.status || strings.Contains(got, "HTTP/1.1") {
				t.Errorf("%s, call %d: status %d, err %v, body %.120q; want %d and one answer", tc.name, i, status, err, got, tc.status)
			}
			if spent := before - r.remaining(); spent != tc.spent {
				t.Errorf("%s, call %d: %d tokens charged, want %d", tc.name, i, spent, tc.spent)
			}
		}
	}
}
