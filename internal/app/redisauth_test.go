package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// A Redis with a password, named by a URL without one or with a wrong one:
// validate --connect and serve's log say what the URL should hold, not the
// reply alone (trial20: NOAUTH, and at start-up a connection reset, sent a
// platform team looking for a network fault).
func TestRedisRefusingCredentialsIsExplained(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := srv.Client().ConfigSet(ctx, "requirepass", "pw").Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url, reply, hint string
	}{
		{"no password", "redis://" + srv.Addr() + "/0", "NOAUTH", "put it in the URL as redis://:PASSWORD@host:port/0"},
		{"wrong password", "redis://:nope@" + srv.Addr() + "/0", "WRONGPASS", "with requirepass alone the user is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// validate --connect
			r := resultFor(t, Probe(ctx, probeConfig(t, config.Store{Backend: "redis", RedisURL: c.url}), 5*time.Second), "store.redis_url")
			if r.Err == nil || !strings.Contains(r.Err.Error(), c.reply) || !strings.Contains(r.Err.Error(), c.hint) {
				t.Errorf("probe: %v, want %s with %q", r.Err, c.reply, c.hint)
			}

			// serve: the start-up line, the idle probe's line, a request's take.
			// Each line is logged once, from the first call that fails, so
			// that call must meet Redis's refusal and not its own deadline:
			// a refusal comes back at once, and store.timeout is long
			// enough that a loaded machine does not turn the first probe
			// into a timeout (trial22: at 50 ms, under -race at load 30,
			// the probe line said kind=timeout with no WRONGPASS).
			mock := startMock(t)
			cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: %q, timeout: 2s, health_check: 100ms, breaker: {open_for: 200ms, min_calls: 10000}}
`, c.url))))
			if err != nil {
				t.Fatal(err)
			}
			h, logs := serveLogged(t, mock, cfg)
			const startLine, probeLine, takeLine = "the store's Redis refused llmguard's credentials", "store unreachable: a health probe failed", "store take failed"
			for i := 0; !strings.Contains(logs.String(), probeLine); i++ {
				if i == 600 {
					t.Fatalf("no probe line after 600 polls 50 ms apart:\n%s", logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
			if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
				t.Fatalf("a fail-open limit answered %d: %s", resp.StatusCode, b)
			}
			for _, line := range []string{startLine, probeLine, takeLine} {
				// At start-up FUNCTION LOAD sends the library (over 16 KiB)
				// and may meet Redis's refusal of a long unauthenticated
				// argument rather than NOAUTH (redisAuthHint): either reply,
				// the same hint.
				if !hasLineWith(logs.String(), line, c.reply, c.hint) &&
					!(line == startLine && c.reply == "NOAUTH" && hasLineWith(logs.String(), line, "unauthenticated bulk length", c.hint)) {
					t.Errorf("no %q line with %s and %q:\n%s", line, c.reply, c.hint, logs.String())
				}
			}
		})
	}

	// The right password: no error, so no hint.
	r := resultFor(t, Probe(ctx, probeConfig(t, config.Store{Backend: "redis", RedisURL: "redis://:pw@" + srv.Addr() + "/0"}), 5*time.Second), "store.redis_url")
	if r.Err != nil {
		t.Errorf("probe with the password: %v", r.Err)
	}
	// Only Redis's own replies get the hint: not text that merely starts alike.
	if h := redisAuthHint(errors.New("NOAUTH lookalike")); h != "" {
		t.Errorf("a plain error got a hint: %q", h)
	}
	// Redis's refusal of a long argument from an unauthenticated client is
	// the same refusal as NOAUTH.
	for _, reply := range []string{"ERR Protocol error: unauthenticated bulk length", "ERR Protocol error: unauthenticated multibulk length"} {
		if h := redisAuthHint(authReply(reply)); !strings.Contains(h, "put it in the URL") {
			t.Errorf("%q: hint %q, want NOAUTH's", reply, h)
		}
	}
}

// authReply is an error reply of Redis as go-redis reads one (a
// redis.Error).
type authReply string

func (e authReply) Error() string { return string(e) }
func (authReply) RedisError()     {}

// hasLineWith reports whether one line of logs holds every one of parts.
func hasLineWith(logs string, parts ...string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
