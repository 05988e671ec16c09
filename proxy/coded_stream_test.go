package proxy

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// TestStreamInACodingNotDecodedKeepsReservation: through real sockets, an
// event stream in a content coding llmguard does not decode (br, a coding
// applied twice, an unknown one, a gzip whose header is broken) is relayed
// unread and keeps its output reservation, instead of being charged its
// input alone; a broken gzip stream reaches the client whole (the bytes
// the decoder read while failing are not lost). A gzip stream llmguard
// decodes is counted as usual.
func TestStreamInACodingNotDecodedKeepsReservation(t *testing.T) {
	w := testWeigher(t)
	est := w.Chat([]byte(panicStreamBody))
	big := strings.Repeat("word ", 3000)
	body := `data: {"choices":[{"index":0,"delta":{"content":"` + big + `"}}]}` + "\n\ndata: [DONE]\n\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(body))
	zw.Close()
	for _, tc := range []struct {
		name, enc, body string
		atLeast         int64
		relayed         int // bytes the client must read
	}{
		{"br", "br", body, est.InputTokens + est.OutputTokens, len(body)},
		{"gzip applied twice", "gzip, gzip", body, est.InputTokens + est.OutputTokens, len(body)},
		{"unknown coding", "x-foo", body, est.InputTokens + est.OutputTokens, len(body)},
		{"gzip with a broken header", "gzip", "\x1f\x8b\x09" + body, est.InputTokens + est.OutputTokens, 3 + len(body)},
		{"gzip decoded", "gzip", gz.String(), est.InputTokens + w.CountText("gpt-4o-mini", big), len(body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: "+tc.enc+
				"\r\ncontent-length: "+itoa(len(tc.body))+"\r\n\r\n"+tc.body)
			r := newRig(t, rigOptions{url: up.url(), w: w})
			full := r.remaining()
			status, _, b, err := r.do("/v1/chat/completions", panicStreamBody, "Accept-Encoding", "identity")
			if err != nil || status != 200 {
				t.Fatalf("status %d, err %v", status, err)
			}
			if len(b) != tc.relayed {
				t.Errorf("client read %d bytes, want %d", len(b), tc.relayed)
			}
			r.waitLedger(1)
			if charged := full - r.remaining(); charged < tc.atLeast {
				t.Errorf("charged %d, want at least %d", charged, tc.atLeast)
			}
		})
	}
}
