package app

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// Close may be called more than once (a signal handler and a deferred
// Close, say): later calls do nothing and report what the first one did,
// on the memory store and on a Redis store with a leased limit and the
// ledger, whose closers are not safe to run twice on their own.
func TestCloseTwice(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	for _, tail := range []string{
		"limits:\n  - {name: user-rpm, scope: user, unit: requests, rate: 10, per: 1m}\n",
		fmt.Sprintf(`
limits:
  - {name: tenant-rpm, scope: tenant, unit: requests, rate: 1, per: 24h, burst: 1000, lease: {size: 100, ttl: 10s}}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 1s}
ledger: {file: %q}
`, srv.Addr(), t.TempDir()+"/ledger.jsonl"),
	} {
		cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, tail)))
		if err != nil {
			t.Fatal(err)
		}
		a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := serveApp(t, mock, a, nil) // its cleanup closes a once more
		if resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		first := a.Close()
		if second := a.Close(); fmt.Sprint(second) != fmt.Sprint(first) {
			t.Errorf("second Close = %v, first %v", second, first)
		}
	}
}
