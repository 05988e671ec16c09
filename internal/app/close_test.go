package app

import (
	"fmt"
	"io"
	"log/slog"
	"net"
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
	srv := redistest.Shared(t)
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

// A Close that runs before Serve has started its servers still ends Serve.
// fasthttp's Shutdown stops only a server whose Serve has registered its
// listener; on a loaded machine Serve's goroutines may start after the
// Close, and that server then accepted for ever while Serve waited for it
// (TestUnknownOrMissingKeyIs401 hung 8m30s under CI load). Here Serve is
// called after Close: it must return (a hang is this test's timeout), and
// leave its listeners closed.
func TestServeAfterCloseReturns(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", "")))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(ln, adm); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	for _, l := range []net.Listener{ln, adm} {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Serve returned", l.Addr())
		}
	}
}
