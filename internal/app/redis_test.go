package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// Through the Redis store, reconciliation is asynchronous but lands: the
// bucket in Redis ends at capacity − actual, not capacity − reserved.
func TestRedisStoreReconcilesThroughTheProxy(t *testing.T) {
	srv := redistest.Shared(t)
	// A store timeout far above a take's round trip: a take timed out on a
	// loaded machine is admitted fail-open from a node-local bucket, and a
	// reconcile timed out (4 × the timeout) never lands; neither is what
	// this test is about.
	h := start(t, slowTPM+fmt.Sprintf("\nstore: {backend: redis, redis_url: \"redis://%s/0\", timeout: 5s}\n", srv.Addr()))
	resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`,
		"x-mock-completion-tokens", "30")
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if r := remainingTokens(t, resp.Header); r != 10000-hiInput-500 {
		t.Fatalf("remaining at admission %d, want %d", r, 10000-hiInput-500)
	}
	key := "llmguard:{acme}:user-tpm:alice"
	var level float64
	deadline := time.Now().Add(60 * time.Second) // a bound on progress, not on the reconcile's speed
	for time.Now().Before(deadline) {
		v, err := srv.Client().Get(context.Background(), key).Result()
		if err == nil {
			level, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
			if level >= 10000-hiInput-30-1 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 1 token a day of refill is < 1 over the test.
	if int64(level) != 10000-hiInput-30 {
		t.Errorf("bucket level in Redis = %v, want %d (reconciled to 30 output tokens)", level, 10000-hiInput-30)
	}
}

// A node whose breaker opened and that then gets no traffic still notices
// the store is back: it probes while the breaker is open, and /readyz says
// closed again without any request.
func TestIdleNodeBreakerClosesByItself(t *testing.T) {
	srv := redistest.Start(t)
	h := start(t, slowTPM+fmt.Sprintf("\nstore: {backend: redis, redis_url: \"redis://%s/0\", timeout: 50ms, breaker: {min_calls: 2, open_for: 300ms}}\n", srv.Addr()))
	srv.Kill()
	for range 3 {
		h.post(testKey, hiBody) // fail-open while the breaker opens
	}
	if b := readyz(t, h.admin)["breaker"]; b == "closed" {
		t.Fatalf("breaker %v after failures, want open", b)
	}
	srv.Restart()
	deadline := time.Now().Add(3 * time.Second)
	for readyz(t, h.admin)["breaker"] != "closed" {
		if time.Now().After(deadline) {
			t.Fatalf("breaker still %v 3 s after Redis returned, with no traffic", readyz(t, h.admin)["breaker"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
