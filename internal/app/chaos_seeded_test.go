//go:build unix

package app

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestChaosRedisPausedQuotaSeeded runs three llmguard nodes (store.nodes:
// 3) on one real Redis with a 5,000-token day quota that fails open, spends
// it to within a few hundred tokens, freezes Redis (SIGSTOP) and sends each
// node requests until it refuses them, then continues Redis and lets the
// fallbacks' spend be charged back. Each node's fallback starts the quota
// at min(its share, what its last take saw left / 3) rather than at a full
// share of 1,666 tokens, so the day closes, in Redis and in the ledgers,
// within the quota plus what the stalest node's reading missed: the two
// requests taken after it (its reading was made before them). Before the
// seeding (every fallback full) the same run closed the day at 9,312
// (195 requests admitted by the fallbacks, against 1 now).
func TestChaosRedisPausedQuotaSeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	const quota = 5000
	srv, nodes, ledgers := startSeededNodes(t, quota)
	quiet := func() { quietSeeded(t, nodes) }

	// Spend the quota to within 450 tokens, round robin: until the answers
	// report under 600 tokens left, then checked in Redis once the
	// settlements' refunds are in (bounded: a request costs tokens).
	for i := 0; i < quota; i++ {
		status, left := postLeft(t, nodes[i%3].url, "sk-load")
		if status != 200 {
			t.Fatalf("request %d before the outage answered %d", i, status)
		}
		if left >= 600 {
			continue
		}
		quiet()
		if storedQuotaUsed(t, srv, "acme", "user-tok", "loader") > quota-450 {
			break
		}
	}
	// One last take on each node: its reading of what is left.
	for _, h := range nodes {
		if status, left := postLeft(t, h.url, "sk-load"); status != 200 {
			t.Fatalf("the last take before the outage answered %d", status)
		} else {
			t.Logf("a node's last reading: %d tokens left", left)
		}
	}
	quiet()
	before := storedQuotaUsed(t, srv, "acme", "user-tok", "loader")
	resume := srv.Pause()
	admitted := 0
	for _, h := range nodes {
		for range 120 { // bounded: a node's share is 1,666 tokens, a request's settles at 24
			if s := postChat(t, h.url, "sk-load"); s.status == 200 {
				admitted++
			} else if s.status != 429 {
				t.Errorf("a fail-open request during the outage answered %d", s.status)
			}
		}
	}
	resume()
	for _, h := range nodes {
		waitSettledAs(t, h, "sk-other")
	}
	time.Sleep(200 * time.Millisecond) // the ledger writers' last flush
	used := storedQuotaUsed(t, srv, "acme", "user-tok", "loader")
	var ledgered int64
	for _, f := range ledgers {
		ledgered += ledgerTokens(t, f)["loader"]
	}
	// The stalest reading (the first node's) was made before the two other
	// nodes' last takes: at most their reservations (100 output tokens and
	// a few of input each) unseen.
	const bound = quota + 2*120
	t.Logf("quota %d: used %d when Redis froze; %d requests admitted by the fallbacks; closed the day at %d in Redis, %d in the ledgers (bound %d)",
		quota, before, admitted, used, ledgered, bound)
	if used != ledgered {
		t.Errorf("Redis holds %d tokens used, the ledgers %d", used, ledgered)
	}
	if used > bound {
		t.Errorf("the day closed at %d tokens of a %d quota, over the bound %d: the fallbacks started fuller than the shared quota was", used, quota, bound)
	}
}

// quietSeeded waits until every node's reconciliations are applied and
// nothing is held, twice, 200 ms apart: a settlement is enqueued after its
// answer was read, so one quiet look may come before it.
func quietSeeded(t *testing.T, nodes [3]*harness) {
	t.Helper()
	for _, h := range nodes {
		waitQuiet(t, h)
	}
	time.Sleep(200 * time.Millisecond)
	for _, h := range nodes {
		waitQuiet(t, h)
	}
}

// startSeededNodes starts a Redis and a mock upstream of their own, and the
// three nodes of the seeded-fallback chaos tests on that Redis
// (store.nodes: 3): a fail-open day quota of quota tokens on user loader,
// each node with its own ledger file, whose paths it returns.
func startSeededNodes(t *testing.T, quota int) (*redistest.Server, [3]*harness, [3]string) {
	t.Helper()
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	var nodes [3]*harness
	var ledgers [3]string
	for i := range nodes {
		ledgers[i] = filepath.Join(dir, fmt.Sprintf("ledger%d.jsonl", i))
		nodes[i] = startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-load, user: loader, tenant: acme}
  - {key: sk-other, user: other, tenant: acme}
limits:
  - {name: user-tok, scope: user, unit: tokens, quota: %d, period: day, users: [loader], on_failure: open}
store:
  backend: redis
  redis_url: "redis://%s/0"
  timeout: 25ms
  nodes: 3
  breaker: {min_calls: 3, open_for: 300ms}
ledger: {file: %q}
`, mock.URL, quota, srv.Addr(), ledgers[i]))
	}
	return srv, nodes, ledgers
}

// waitQuiet waits, a bounded loop, until h's node holds no reconciliation,
// fallback charge or ledger record, without sending a request.
func waitQuiet(t *testing.T, h *harness) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := readyz(t, h.admin)
		l, _ := r["ledger"].(map[string]any)
		if r["reconcile_pending"] == 0.0 && r["fallback_charges_held"] == 0.0 && l["pending"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not quiet: %v", r)
		}
	}
}

// waitSettledAs is waitSettled with its prodding requests sent with key
// (a caller the measured quota does not apply to).
func waitSettledAs(t *testing.T, h *harness, key string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := readyz(t, h.admin)
		l, _ := r["ledger"].(map[string]any)
		if r["breaker"] == "closed" && r["reconcile_pending"] == 0.0 && r["fallback_charges_held"] == 0.0 && l["pending"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v", r)
		}
		postChat(t, h.url, key)
	}
}

// postLeft sends hiBody with key to url's chat endpoint and returns the
// status and the remaining tokens its answer reports (-1: none).
func postLeft(t *testing.T, url, key string) (status int, left int64) {
	t.Helper()
	return postLeftBody(t, url, key, hiBody)
}

// postLeftBody is postLeft with body.
func postLeftBody(t *testing.T, url, key, body string) (status int, left int64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	left, err = strconv.ParseInt(resp.Header.Get("X-Ratelimit-Remaining-Tokens"), 10, 64)
	if err != nil {
		left = -1
	}
	return resp.StatusCode, left
}
