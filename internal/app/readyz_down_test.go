package app

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// A node whose Redis is down from the start, and that serves no request,
// says degraded on /readyz (its breaker, which opens after min_calls
// failed calls, is still closed: it said degraded:false), and says it no
// more once Redis is back, still without a request: the node probes the
// store while its last call (here the start-up script load) failed.
func TestReadyzDegradedWhileRedisDownFromStart(t *testing.T) {
	srv, a := idleAppRedisDown(t, io.Discard)
	r := a.stores.readiness("redis")
	if r["degraded"] != true || r["breaker"] != "closed" {
		t.Fatalf("step 1 (Redis down since start, no request): readiness %v, want degraded with the breaker still closed", r)
	}
	srv.Restart()
	// The probe runs every open_for/2 (100 ms); give a loaded machine
	// plenty of its rounds.
	for i := 0; ; i++ {
		r = a.stores.readiness("redis")
		if r["degraded"] == false {
			break
		}
		if i == 600 {
			t.Fatalf("step 2 (Redis back, no request): still %v after 600 polls 50 ms apart", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idleAppRedisDown starts an App on a Redis killed before it starts (one
// fail-open requests limit, a 50 ms store timeout, the breaker open for
// 200 ms), logging to out, and serving no request; it returns the Redis,
// to restart, and the App, closed at the test's end.
func idleAppRedisDown(t *testing.T, out io.Writer) (*redistest.Server, *App) {
	t.Helper()
	srv := redistest.Start(t)
	srv.Kill()
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, breaker: {open_for: 200ms}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(out, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return srv, a
}

// A node that serves no request notices its Redis going down: it probes
// the store once no call has ended for store.health_check, so its /readyz
// says degraded (it said degraded:false with the breaker closed for as
// long as no request came), and says it no more once Redis is back.
func TestReadyzDegradedWhenIdleNodesRedisDies(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, health_check: 100ms, breaker: {open_for: 10s}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	waitReadiness := func(step string, degraded bool) {
		t.Helper()
		for i := 0; ; i++ {
			r := a.stores.readiness("redis")
			if r["degraded"] == degraded {
				return
			}
			if i == 600 {
				t.Fatalf("%s: still %v after 600 polls 50 ms apart", step, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReadiness("step 1 (Redis up, no request)", false)
	srv.Kill()
	waitReadiness("step 2 (Redis killed, no request)", true)
	srv.Restart()
	waitReadiness("step 3 (Redis back, no request)", false)
}

// An idle node logs its Redis becoming unreachable, from its health probe
// (one WARN line for the run of failed probes, not one per probe), and
// logs it answering again (INFO), with no request and with the breaker
// still closed (min_calls 10000: it never opens here, so only the probe's
// own lines can say it). Before, such a node wrote nothing until a
// request's take failed or min_calls probes opened the breaker (some 20 s
// at the defaults), while /readyz already said degraded.
func TestIdleNodeLogsItsStoreGoingAndComing(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := config.Parse([]byte(baseConfig(t, "http://127.0.0.1:1", fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, health_check: 100ms, breaker: {open_for: 200ms, min_calls: 10000}}
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
	const down, back = "store unreachable: a health probe failed", "store answers again after failed calls"
	probes := func() float64 {
		n := 0.0
		for _, kind := range []string{"timeout", "connection", "other"} {
			v, _ := gathered(t, a.Registry, "llmguard_store_errors_total", map[string]string{"op": "probe", "kind": kind})
			n += v
		}
		return n
	}
	waitFor := func(step string, done func() bool) {
		t.Helper()
		for i := 0; !done(); i++ {
			if i == 600 {
				t.Fatalf("%s: not after 600 polls 50 ms apart; log:\n%s", step, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := logs.String(); strings.Contains(out, down) {
		t.Fatalf("step 1 (Redis up, no request): logged %q:\n%s", down, out)
	}
	srv.Kill()
	waitFor("step 2 (Redis killed, no request): a WARN line", func() bool { return strings.Contains(logs.String(), down) })
	// Several more failed probes (every open_for/2), still one line.
	failed := probes()
	waitFor("step 3 (Redis still down): 3 more failed probes", func() bool { return probes() >= failed+3 })
	if out := logs.String(); strings.Count(out, down) != 1 || !strings.Contains(out, "level=WARN msg=\""+down) ||
		strings.Contains(out, "store circuit breaker") || strings.Contains(out, "store take failed") {
		t.Errorf("step 3: want one WARN %q, no breaker or take line:\n%s", down, out)
	}
	srv.Restart()
	waitFor("step 4 (Redis back, no request): an INFO line", func() bool {
		out := logs.String()
		return strings.LastIndex(out, back) > strings.Index(out, down)
	})
	if r := a.stores.readiness("redis"); r["degraded"] != false {
		t.Errorf("step 4: readiness %v, want not degraded", r)
	}
}

// A request's failed take after an idle node's probe line is logged too:
// the probe's line says no request needed the store, and the take line
// says one did and was served by the fallback. They shared one rate limit,
// so for failedTakeLogEvery after the probe's line requests were served
// by the fallback with no line at all (trial16).
func TestFailedTakeLoggedAfterTheProbesLine(t *testing.T) {
	srv := redistest.Start(t)
	mock := startMock(t)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms, health_check: 100ms, breaker: {open_for: 200ms, min_calls: 10000}}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := serveLogged(t, mock, cfg)
	const probeLine, takeLine = "store unreachable: a health probe failed", "store take failed"
	srv.Kill()
	for i := 0; !strings.Contains(logs.String(), probeLine); i++ {
		if i == 600 {
			t.Fatalf("no probe line after 600 polls 50 ms apart:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
		t.Fatalf("Redis down: a fail-open limit answered %d: %s", resp.StatusCode, b)
	}
	if out := logs.String(); strings.Contains(out, "store circuit breaker") {
		t.Fatalf("the breaker opened (min_calls 10000); this test is about a closed one:\n%s", out)
	} else if !strings.Contains(out, takeLine) || strings.Index(out, takeLine) < strings.Index(out, probeLine) {
		t.Errorf("a request's take failed after the probe's line and was not logged:\n%s", out)
	}
}
