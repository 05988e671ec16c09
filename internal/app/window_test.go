package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// Window limits through the proxy on a frozen clock (noon, a window
// boundary): a fixed window admits its rate and asks the next request to
// wait exactly until the window ends; a sliding window admits its rate and
// asks it to wait into the next window, until the weighted previous window
// leaves room: 3 units taken, one more fits once 3 × (60 − e)/60 <= 2,
// e = 20s: 80s. The 429 names the limit and its algorithm, and the
// RateLimit-Policy window is the limit's.
func TestWindowLimitsThroughTheProxy(t *testing.T) {
	for _, tc := range []struct {
		algorithm  string
		retryAfter string
	}{
		{algorithm: "fixed_window", retryAfter: "60"},
		{algorithm: "sliding_window", retryAfter: "80"},
	} {
		t.Run(tc.algorithm, func(t *testing.T) {
			h := startFrozen(t, fmt.Sprintf(`limits:
  - {name: rpm, scope: user, unit: requests, rate: 3, per: 1m, algorithm: %s}`, tc.algorithm))
			for i := range 3 {
				resp, body := h.post(testKey, hiBody)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, body)
				}
				if got := resp.Header.Get("RateLimit-Policy"); !strings.Contains(got, "q=3;w=60") {
					t.Errorf("RateLimit-Policy %q, want q=3;w=60", got)
				}
			}
			resp, body := h.post(testKey, hiBody)
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != tc.retryAfter {
				t.Fatalf("4th request: %d, Retry-After %q, want 429 after %s s: %s", resp.StatusCode, resp.Header.Get("Retry-After"), tc.retryAfter, body)
			}
			if ms := resp.Header.Get("retry-after-ms"); ms != tc.retryAfter+"000" {
				t.Errorf("retry-after-ms %q, want %s000 (exact)", ms, tc.retryAfter)
			}
			if !strings.Contains(body, "rpm") || !strings.Contains(body, tc.algorithm) {
				t.Errorf("the 429 does not name the limit and its algorithm: %s", body)
			}
			// bob has his own window.
			if resp, body := h.post("sk-test-bob", hiBody); resp.StatusCode != 200 {
				t.Errorf("bob: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// Through Redis and Redis Cluster (the store's clock: Redis TIME), a
// sliding-window token limit is reconciled into the window of the take: the
// counter ends holding what the request really used, input plus 30 output
// tokens, not the 500 reserved.
func TestWindowLimitReconcilesThroughRedis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) (string, func(key string) (string, error))
	}{
		{name: "redis", store: func(t *testing.T) (string, func(string) (string, error)) {
			srv := redistest.Shared(t)
			return fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", timeout: 1s}", srv.Addr()),
				func(key string) (string, error) { return srv.Client().Get(context.Background(), key).Result() }
		}},
		{name: "cluster", store: func(t *testing.T) (string, func(string) (string, error)) {
			c := redistest.SharedCluster(t, 3)
			return fmt.Sprintf("store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 1s}", strings.Join(c.Addrs(), ", ")),
				func(key string) (string, error) { return c.Client().Get(context.Background(), key).Result() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, get := tc.store(t)
			h := start(t, `limits:
  - {name: tpd, scope: user, unit: tokens, rate: 100000, per: 24h, algorithm: sliding_window, on_failure: closed}
`+store+"\n")
			resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`,
				"x-mock-completion-tokens", "30")
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if r := remainingTokens(t, resp.Header); r != 100000-hiInput-500 {
				t.Fatalf("remaining at admission %d, want %d", r, 100000-hiInput-500)
			}
			var v string
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				var prev, cur, start int64
				v, _ = get("llmguard:{acme}:tpd:alice")
				if n, _ := fmt.Sscanf(v, "w %d %d %d", &prev, &cur, &start); n == 3 && prev+cur == hiInput+30 {
					if start%(24*3600*1000000) != 0 {
						t.Fatalf("window start %d is not a day boundary", start)
					}
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("the counter holds %q, want %d tokens counted (reconciled to 30 output tokens)", v, hiInput+30)
		})
	}
}
