package app

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestResponseBudgetFromConfigKeptOnReload: max_inflight_response_bytes
// reaches the proxy (a 200 KiB answer finds no room in 64 KiB: it is relayed
// whole and keeps its reservation), and a reload that changes it keeps
// working: it logs that the setting changes at restart only, the new limits
// apply, and the running budget stays.
func TestResponseBudgetFromConfigKeptOnReload(t *testing.T) {
	answer := `{"id":"chatcmpl-1","object":"chat.completion","usage":{"prompt_tokens":8,"completion_tokens":1},"pad":"` +
		strings.Repeat("x", 200<<10) + `"}`
	full := "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + strconv.Itoa(len(answer)) + "\r\n\r\n" + answer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, full)
				}
			}()
		}
	}()
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	write := func(burst, budget string) {
		t.Helper()
		tail := strings.Replace(slowTPM, "burst: 10000", "burst: "+burst, 1) + "\nmax_inflight_response_bytes: " + budget + "\n"
		if err := os.WriteFile(path, []byte(baseConfig(t, "http://"+ln.Addr().String(), tail)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10000", "65536")
	logs := &syncBuffer{}
	h := startFile(t, nil, path, slog.New(slog.NewTextHandler(logs, nil)))
	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 || body != answer {
		t.Fatalf("%d, %d bytes of %d: the answer must pass through whole", resp.StatusCode, len(body), len(answer))
	}
	resp, _ := h.post(testKey, hiBody)
	if r, want := remainingTokens(t, resp.Header), int64(10000-2*(hiInput+100)); r != want {
		t.Errorf("remaining %d, want %d: an answer without room keeps its reservation (reported: 9 tokens)", r, want)
	}

	write("20000", "1048576")
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "field=max_inflight_response_bytes") {
		t.Errorf("the reload did not say max_inflight_response_bytes changes at restart:\n%s", logs.String())
	}
	// The new burst applies (the bucket keeps its use); the second answer,
	// under the running 64 KiB budget, kept its reservation too.
	resp, _ = h.post(testKey, hiBody)
	if l := resp.Header.Get("x-ratelimit-limit-tokens"); l != "20000" {
		t.Errorf("after the reload: limit %q, want the new 20000", l)
	}
	if r, want := remainingTokens(t, resp.Header), int64(10000-3*(hiInput+100)); r != want {
		t.Errorf("after the reload: remaining %d, want %d", r, want)
	}
	for i := 0; h.app.Proxy.ResponseBytesHeld() != 0; i++ {
		if i == 2000 {
			t.Fatalf("%d answer bytes still held", h.app.Proxy.ResponseBytesHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
