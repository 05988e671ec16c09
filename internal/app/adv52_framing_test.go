package app

// adv52 (2026-12-07): an upstream framing an answer two ways.

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// An upstream answer naming both Content-Length and chunked coding (RFC
// 9112 §6.3: chunked wins, and the connection must not be reused on the
// length's word) is read as chunked: its usage charged whole, and the
// pooled connection's next answers are their own, not the rest of it.
func TestAdv52ChunkedBesideContentLength(t *testing.T) {
	a := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":5000,"total_tokens":5008}}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(a), a)
	var n atomic.Int32
	url := startRawUpstream(t, func(c net.Conn) {
		if n.Add(1) == 1 {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\nTransfer-Encoding: chunked\r\n\r\n%s", chunked)
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(a), a)
	})
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + userTokensLimit("user-tpm", 1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	for i := range 3 {
		before := h.tokensLeft()
		resp, got := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`)
		charged := before - h.tokensLeft()
		if resp.StatusCode != 200 || got != a || charged != 5008 {
			t.Errorf("call %d: status %d, answer relayed whole %v, charged %d; want 200, true, 5,008", i, resp.StatusCode, got == a, charged)
		}
	}
}
