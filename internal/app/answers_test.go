package app

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestResponseBudgetFromConfigKeptOnReload: max_inflight_response_bytes
// reaches the proxy (a 200 KiB answer finds no room in 64 KiB: it is relayed
// whole and charged at least its reservation: its pad counted as text, its
// usage of 1 output token contradicted by its bytes, unread37), and a reload that changes it keeps
// working: it logs that the setting changes at restart only, the new limits
// apply, and the running budget stays.
func TestResponseBudgetFromConfigKeptOnReload(t *testing.T) {
	answer := `{"id":"chatcmpl-1","object":"chat.completion","usage":{"prompt_tokens":8,"completion_tokens":1},"pad":"` +
		strings.Repeat("x", 200<<10) + `"}`
	full := "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + strconv.Itoa(len(answer)) + "\r\n\r\n" + answer
	upstream := startRawUpstream(t, func(c net.Conn) { io.WriteString(c, full) })
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	write := func(burst, budget string) {
		t.Helper()
		tail := strings.Replace(slowTPM, "burst: 10000", "burst: "+burst, 1) + "\nmax_inflight_response_bytes: " + budget + "\n"
		if err := os.WriteFile(path, []byte(baseConfig(t, upstream, tail)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100000", "65536")
	logs := &syncBuffer{}
	h := startFile(t, nil, path, slog.New(slog.NewTextHandler(logs, nil)))
	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 || body != answer {
		t.Fatalf("%d, %d bytes of %d: the answer must pass through whole", resp.StatusCode, len(body), len(answer))
	}
	resp, _ := h.post(testKey, hiBody)
	// The pad: 25,600 tokens (200 KiB of "x" counted as text).
	if r, most := remainingTokens(t, resp.Header), int64(100000-2*(hiInput+100)-25000); r > most || r < most-2000 {
		t.Errorf("remaining %d, want %d to %d: an answer without room is charged its pad as text (reported: 9 tokens)", r, most-2000, most)
	}

	write("200000", "1048576")
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "field=max_inflight_response_bytes") {
		t.Errorf("the reload did not say max_inflight_response_bytes changes at restart:\n%s", logs.String())
	}
	// The new burst applies (the bucket keeps its use); the second answer,
	// under the running 64 KiB budget, was charged its pad too.
	resp, _ = h.post(testKey, hiBody)
	if l := resp.Header.Get("x-ratelimit-limit-tokens"); l != "200000" {
		t.Errorf("after the reload: limit %q, want the new 200000", l)
	}
	if r, most := remainingTokens(t, resp.Header), int64(100000-3*(hiInput+100)-2*25000); r > most || r < most-4000 {
		t.Errorf("after the reload: remaining %d, want %d to %d", r, most-4000, most)
	}
	for i := 0; h.app.Proxy.ResponseBytesHeld() != 0; i++ {
		if i == 2000 {
			t.Fatalf("%d answer bytes still held", h.app.Proxy.ResponseBytesHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
