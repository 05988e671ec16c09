package app

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/redistest"
)

// denierTail has two limits of one request each that a request drains
// together: key-hourly, the narrower (taken first), refills in an hour;
// everyone-daily, global (another slot of a Redis Cluster), in a day.
const denierTail = `
limits:
  - {name: key-hourly, scope: key, unit: requests, rate: 1, per: 1h, burst: 1}
  - {name: everyone-daily, scope: global, unit: requests, rate: 1, per: 24h, burst: 1}
`

// testDenierNamesItsWait: once both limits are drained, a request is
// denied by both, and its 429 names the one whose wait it reports, the
// daily one, everywhere a client looks: the message, x-llmguard-limit,
// OpenAI's x-ratelimit-*-requests and Retry-After; the RateLimit field
// lists it with its own remaining and reset. The next request, answered
// by the deny cache on Redis, says the same. Before, the hourly limit was
// named (the first short one) with the daily limit's wait.
func testDenierNamesItsWait(t *testing.T, store string) {
	h := start(t, denierTail+store)
	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	for i := range 2 {
		resp, body := h.post(testKey, hiBody)
		where := fmt.Sprintf("denial %d", i+1)
		if resp.StatusCode != 429 {
			t.Fatalf("%s: %d %s", where, resp.StatusCode, body)
		}
		if got := resp.Header.Get("x-llmguard-limit"); got != "everyone-daily" {
			t.Errorf("%s: x-llmguard-limit %q, want everyone-daily", where, got)
		}
		if !strings.Contains(body, "limit everyone-daily (global scope)") || !strings.Contains(body, "per 24h0m0s") || strings.Contains(body, "key-hourly") {
			t.Errorf("%s: message %s, want the daily limit's", where, body)
		}
		// The wait is the daily limit's: just under a day, more than the
		// hourly limit's hour (the test takes far less than 23 hours).
		retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || retry <= 3600 || retry > 86400 {
			t.Errorf("%s: Retry-After %q, want the daily limit's wait", where, resp.Header.Get("Retry-After"))
		}
		if !strings.Contains(body, "Please try again in 23h") && !strings.Contains(body, "Please try again in 24h") {
			t.Errorf("%s: message %s, want a wait of about a day", where, body)
		}
		if got := resp.Header.Get("x-ratelimit-reset-requests"); !strings.HasPrefix(got, "23h") && !strings.HasPrefix(got, "24h") {
			t.Errorf("%s: x-ratelimit-reset-requests %q, want the daily limit's reset", where, got)
		}
		if got := resp.Header.Get("x-ratelimit-remaining-requests"); got != "0" {
			t.Errorf("%s: x-ratelimit-remaining-requests %q, want 0", where, got)
		}
		rl := resp.Header.Get("RateLimit")
		if !strings.Contains(rl, `"everyone-daily";r=0;t=8`) { // t: 86,3xx to 86,400 seconds
			t.Errorf("%s: RateLimit %q, want the daily limit with its own reset", where, rl)
		}
	}
}

func TestDenierNamesItsWaitMemory(t *testing.T) { testDenierNamesItsWait(t, "") }

func TestDenierNamesItsWaitRedis(t *testing.T) {
	srv := redistest.Start(t)
	testDenierNamesItsWait(t, fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", timeout: 5s, deny_cache: 10s}\n", srv.Addr()))
}

func TestDenierNamesItsWaitCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	testDenierNamesItsWait(t, fmt.Sprintf("store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 5s, deny_cache: 10s}\n", strings.Join(c.Addrs(), ", ")))
}
