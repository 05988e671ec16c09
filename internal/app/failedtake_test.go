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

// An outage is logged once where it starts (WARN, closed to open) and once
// where it ends (INFO, to closed, with its length); the breaker's probes in
// between (open to half-open to open, every open_for) are DEBUG lines, not
// two WARN lines every open_for (a trial's ten-second outage wrote six).
func TestBreakerOutageLoggedAtItsEnds(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, breaker: {min_calls: 2, open_for: 100ms}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	breaker := func() float64 {
		v, _ := gathered(t, a.Registry, "llmguard_breaker_state", nil)
		return v
	}
	admin := srv.Client()
	defer admin.Close()
	// Every client waits out the pause: takes outlive their 50 ms, the
	// breaker opens, and its probes fail for as long as the pause lasts.
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 3000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && breaker() == 0; i++ {
		h.post(testKey, body)
	}
	if breaker() == 0 {
		t.Fatal("the breaker did not open while Redis was paused")
	}
	// Wait for several probes (half-open, then open again) while paused.
	for i := 0; i < 200 && strings.Count(logs.String(), "to=half-open") < 2; i++ {
		time.Sleep(20 * time.Millisecond)
		h.post(testKey, body)
	}
	if err := admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500 && breaker() != 0; i++ {
		time.Sleep(20 * time.Millisecond)
		h.post(testKey, body)
	}
	if breaker() != 0 {
		t.Fatalf("the breaker did not close after Redis came back:\n%s", logs)
	}
	out := logs.String()
	var lines []string // at INFO and above
	probes := 0        // DEBUG lines of a probe's half-open
	for _, l := range strings.Split(out, "\n") {
		switch {
		case !strings.Contains(l, "store circuit breaker"):
		case strings.Contains(l, "level=DEBUG"):
			if strings.Contains(l, "to=half-open") {
				probes++
			}
		default:
			lines = append(lines, l)
		}
	}
	if probes < 2 {
		t.Fatalf("%d probes logged at DEBUG during the outage, want at least 2", probes)
	}
	if len(lines) != 2 {
		t.Fatalf("%d breaker lines at INFO and above, want 2 (the outage's start and end):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if l := lines[0]; !strings.Contains(l, "level=WARN") || !strings.Contains(l, "from=closed to=open") {
		t.Errorf("first line %q: want the outage's start at WARN", l)
	}
	if l := lines[1]; !strings.Contains(l, "level=INFO") || !strings.Contains(l, "to=closed") || !strings.Contains(l, "outage=") {
		t.Errorf("last line %q: want the outage's end at INFO with its length", l)
	}
}
