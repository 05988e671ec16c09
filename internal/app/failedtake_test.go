package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// An isolated failed take, too few to open the breaker, is still logged:
// the operator sees that a fail-open limit was served by the node's
// fallback bucket. Later failures are logged at most once per
// failedTakeLogEvery (the bound is measured from this run's own clock).
func TestIsolatedFailedTakeIsLogged(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
		t.Fatalf("healthy store: status %d: %s", resp.StatusCode, b)
	}
	const line = "store take failed"
	if strings.Contains(logs.String(), line) {
		t.Fatalf("logged a failed take before any failed:\n%s", logs)
	}
	admin := srv.Client()
	defer admin.Close()
	began := time.Now()
	const failures = 3
	for i := range failures {
		// Every client waits out the pause: the take outlives its 50 ms.
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		resp, b := h.post(testKey, body)
		if err := admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("failure %d: a fail-open limit answered %d: %s", i, resp.StatusCode, b)
		}
	}
	elapsed := time.Since(began)
	n := strings.Count(logs.String(), line)
	if n < 1 {
		t.Fatalf("%d failed takes, no line saying so:\n%s", failures, logs)
	}
	// The line says what failed, not only its kind: here the take's
	// deadline (a CLUSTERDOWN or LOADING reply is kind other, told apart
	// only by its text).
	if first := logs.String()[strings.Index(logs.String(), line):]; !strings.Contains(first[:strings.IndexByte(first, '\n')], "err=") {
		t.Errorf("the failed take's line does not carry its error:\n%s", first)
	}
	if most := 1 + int(elapsed/failedTakeLogEvery); n > most {
		t.Errorf("%d lines for %d failed takes in %v; at most %d", n, failures, elapsed, most)
	}
	// Logged for the failure itself, not for the breaker opening later
	// (reconciliations that waited out the pause may open it after).
	if out := logs.String(); strings.Contains(out, "store circuit breaker") &&
		strings.Index(out, "store circuit breaker") < strings.Index(out, line) {
		t.Errorf("the first failed take was logged only after the breaker opened:\n%s", out)
	}
}
