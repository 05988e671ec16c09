package proxy

import (
	"strings"
	"testing"
)

// TestAdv55EndlessHeadOrInterimFlood (adv55): an upstream whose answer
// head never ends (header lines past the 16 KiB read buffer, the upstream
// still writing), or that sends 150 interim answers (103 Early Hints)
// before its 200, gets the caller llmguard's 502 upstream_error, and the
// reservation stands (the upstream read the request). Neither holds more
// than the read buffer (fasthttp stops at 100 interim answers).
func TestAdv55EndlessHeadOrInterimFlood(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct{ name, answer string }{
		{"head past the read buffer", "HTTP/1.1 200 OK\r\n" + strings.Repeat("x-filler: "+strings.Repeat("a", 90)+"\r\n", 20000)},
		{"150 interim answers", strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n", 150) + ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startRawUpstream(t, tc.answer)
			r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
			before := r.remaining()
			status, _, got, err := r.do("/v1/chat/completions", panicBody)
			if err != nil || status != 502 || !strings.Contains(got, `"upstream_unreachable"`) {
				t.Fatalf("status %d, err %v, body %.200s; want 502 upstream_unreachable", status, err, got)
			}
			if spent := before - r.remaining(); spent < 50 {
				t.Errorf("%d tokens kept; want the reservation (at least the 50 max_tokens)", spent)
			}
		})
	}
}
