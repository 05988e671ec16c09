package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// A request held by on_limit: wait reports the hold as wait_us in its
// access-log line, apart from llmguard's own time: overhead_us excludes
// it, as it excludes the upstream's time. On the real clock, the three
// measure disjoint parts of the request's life, so overhead + upstream +
// wait never exceeds duration (the same run's readings of one monotonic
// clock; no bound on how long anything took). Before, overhead_us held
// the wait: a second held showed as a second of llmguard's own time.
func TestWaitIsNotOverhead(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "access.log")
	// 20 a second, burst 1: the second of two requests sent one after the
	// other waits about 50 ms.
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, `
access_log: {enabled: true, output: `+path+`}
limits:
  - {name: key-rps, scope: key, unit: requests, rate: 20, per: 1s, burst: 1, on_limit: wait}
`)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil) // the real clock
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	var held string
	for range 3 {
		resp, body := h.post(testKey, hiBody)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if w := resp.Header.Get("x-llmguard-wait-ms"); w != "" && w != "0" {
			held = resp.Header.Get("x-llmguard-request-id")
		}
	}
	if held == "" {
		t.Fatal("no request was held: the test needs one")
	}
	a.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if l["request_id"] != held {
			continue
		}
		found = true
		over, up, wait, dur := l["overhead_us"].(float64), l["upstream_us"].(float64), l["wait_us"].(float64), l["duration_us"].(float64)
		if !(wait > 0) || over+up+wait > dur+1 { // +1: each is rounded to a µs
			t.Errorf("held request: overhead %v + upstream %v + wait %v µs exceeds its duration %v µs (or no wait)", over, up, wait, dur)
		}
	}
	if !found {
		t.Fatalf("no access-log line for the held request %s:\n%s", held, b)
	}
}
