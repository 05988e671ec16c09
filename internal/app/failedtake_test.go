package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// An isolated failed take, too few to open the breaker, is still logged:
// the operator sees that a fail-open limit was served by the node's
// fallback bucket. Later failures are logged at most once per
// failedTakeLogEvery (the bound is measured from this run's own clock).
func TestIsolatedFailedTakeIsLogged(t *testing.T) {
	srv := redistest.Start(t)
	mock := startMock(t)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 500ms}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := serveLogged(t, mock, cfg)
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
		// Every client waits out the pause: the take outlives its 500 ms
		// (a timeout short enough for that, long enough that the healthy
		// take above does not fail on a loaded machine: at 50 ms it took
		// 130 ms once in CI at load 13 and was logged as failed).
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
	// The end of a logged run of failures is logged too, once a call
	// succeeds again (trial3: the start alone, and nothing when Redis came
	// back); had the breaker opened, its close line would end it.
	const back = "store answers again after failed calls"
	ended := func(out string) bool {
		return max(strings.LastIndex(out, back), strings.LastIndex(out, "to=closed")) > strings.LastIndex(out, line)
	}
	// Reconciliations that waited out the pauses may have opened the
	// breaker: post until it has closed again (its probe, then a call).
	for i := 0; i < 300 && !ended(logs.String()); i++ {
		if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
			t.Fatalf("store back: status %d: %s", resp.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	if end := max(strings.LastIndex(out, back), strings.LastIndex(out, "to=closed")); end < strings.LastIndex(out, line) {
		t.Fatalf("the last failed take's line has no end after it:\n%s", out)
	}
	if i := strings.Index(out, back); i >= 0 && !strings.Contains(out[i:i+strings.IndexByte(out[i:], '\n')], "failed_calls=") {
		t.Errorf("the end line does not count the failed calls:\n%s", out[i:])
	}
}

// A run of failures too short to open the breaker is logged where it ends
// too (INFO, with the failed calls and the time since the first), not
// only where it starts (trial3: Redis down 6 s under light traffic wrote
// one "store take failed" line and nothing when it came back).
func TestIsolatedFailuresLoggedWhereTheyEnd(t *testing.T) {
	srv := redistest.Start(t)
	mock := startMock(t)
	// min_calls 10000: the breaker never opens here, so only the run's own
	// line can say that the store answers again.
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, breaker: {min_calls: 10000}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := serveLogged(t, mock, cfg)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	admin := srv.Client()
	defer admin.Close()
	const back = "store answers again after failed calls"
	for i := range 2 {
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 1000, "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
		if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
			t.Fatalf("paused %d: status %d: %s", i, resp.StatusCode, b)
		}
		// Checked while Redis is still paused: once it is not, any call
		// (the request's own settlement) may end the run.
		if i == 0 && strings.Contains(logs.String(), back) {
			t.Fatalf("the end logged while no call could succeed:\n%s", logs)
		}
		if err := admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 100 && strings.Count(logs.String(), back) < 1; j++ {
			if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
				t.Fatalf("store back: status %d: %s", resp.StatusCode, b)
			}
		}
	}
	out := logs.String()
	if strings.Contains(out, "store circuit breaker") {
		t.Fatalf("the breaker opened; this test is about failures it does not see:\n%s", out)
	}
	// One start line (the second run's is within failedTakeLogEvery of
	// the first, so not written) and one end line: the first run's. The
	// second run had no line of its own, so no end line either.
	if n, m := strings.Count(out, "store take failed"), strings.Count(out, back); n != 1 || m != 1 {
		t.Fatalf("%d start lines and %d end lines, want 1 and 1:\n%s", n, m, out)
	}
	i := strings.Index(out, back)
	end := out[strings.LastIndexByte(out[:i], '\n')+1:]
	end = end[:strings.IndexByte(end, '\n')]
	if !strings.Contains(end, "level=INFO") || !strings.Contains(end, "failed_calls=") || !strings.Contains(end, "since_first_failure=") {
		t.Errorf("end line %q: want INFO with failed_calls and since_first_failure", end)
	}
	if strings.Index(out, back) < strings.Index(out, "store take failed") {
		t.Errorf("the end was logged before the start:\n%s", out)
	}
}

// An outage is logged once where it starts (WARN, closed to open) and once
// where it ends (INFO, to closed, with its length); the breaker's probes in
// between (open to half-open to open, every open_for) are DEBUG lines, not
// two WARN lines every open_for (a trial's ten-second outage wrote six).
func TestBreakerOutageLoggedAtItsEnds(t *testing.T) {
	srv := redistest.Start(t)
	mock := startMock(t)
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

// The breaker's close line gives the outage from the first failed call of
// the run that opened it, not from the opening: an idle node's probes,
// one every open_for/2, open it only after min_calls of them (trial16:
// Redis down 26 s logged outage=6.014s). Bounded by the node's own log
// lines' times.
func TestBreakerOutageCountsFromTheFirstFailure(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, health_check: 100ms, breaker: {open_for: 200ms, min_calls: 15}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	const down, open, closed = "store unreachable: a health probe failed", "from=closed to=open", "to=closed"
	waitFor := func(step, what string) {
		t.Helper()
		for i := 0; !strings.Contains(logs.String(), what); i++ {
			if i == 1200 {
				t.Fatalf("%s: no %q after 1200 polls 50 ms apart; log:\n%s", step, what, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	srv.Kill()
	waitFor("step 1 (Redis killed, no request)", open)
	srv.Restart()
	waitFor("step 2 (Redis back, no request)", closed)
	// field is the value of key= in the first log line holding what.
	field := func(what, key string) string {
		t.Helper()
		for _, l := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(l, what) {
				continue
			}
			for _, f := range strings.Fields(l) {
				if v, ok := strings.CutPrefix(f, key+"="); ok {
					return v
				}
			}
		}
		t.Fatalf("no %s= in a line with %q:\n%s", key, what, logs.String())
		return ""
	}
	at := func(what string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, field(what, "time"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	outage, err := time.ParseDuration(field(closed, "outage"))
	if err != nil {
		t.Fatal(err)
	}
	// From the first failed probe's line to the close line, less half the
	// time the breaker took to open (at least 14 probes 100 ms apart: room
	// for the lines' own delays); counted from the opening, the outage
	// would be short of it by the whole of that time.
	first, opened, closedAt := at(down), at(open), at(closed)
	if want := closedAt.Sub(first) - opened.Sub(first)/2; outage < want {
		t.Errorf("outage=%v, want at least %v: the %v from the first failed probe's line to the close line, less half the %v the breaker took to open:\n%s",
			outage, want, closedAt.Sub(first), opened.Sub(first), logs.String())
	}
}
