package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// shardLevel is what a token bucket key holds in Redis: its level, or
// full when the key is absent (a bucket left full is deleted).
func shardLevel(t *testing.T, c redis.UniversalClient, key string, full float64) float64 {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return full
	}
	if err != nil {
		t.Fatal(err)
	}
	level, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", key, v, err)
	}
	return level
}

// Through real sockets, on a Redis Cluster: a global limit of 40 requests
// split into 4 shards (one per hash tag, each in a slot of its own) admits
// exactly 40 of 80 requests sent by 8 clients at once (and none after a
// client's first denial: every shard is tried first), and a tenant's
// sharded token limit is reconciled on the shards taken from: the shards
// end holding the limit less what the admitted requests really used.
func TestShardedGlobalLimitThroughTheProxy(t *testing.T) {
	cluster := redistest.SharedCluster(t, 3)
	const (
		burst      = 40
		completion = 5
		clients    = 8
		each       = 10
	)
	h := start(t, fmt.Sprintf(`
limits:
  - {name: all-rpd, scope: global, unit: requests, rate: 8, per: 24h, burst: %d, shards: 4, on_failure: closed}
  - {name: acme-tokens, scope: tenant, unit: tokens, rate: 4, per: 24h, burst: 100000, shards: 4, on_failure: closed}
store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 10s}
`, burst, strings.Join(cluster.Addrs(), ", ")))
	// timeout 10s: what is counted here is the shards' arithmetic, and a
	// take that times out on a loaded machine (1 s did under -race at load
	// 20) answers 503 and is voided, its units coming back after another
	// client's denial.

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		denied   *http.Response
	)
	var wg sync.WaitGroup
	for c := range clients {
		key := []string{testKey, "sk-test-bob"}[c%2]
		wg.Go(func() {
			seen429 := false
			for n := range each {
				resp, _ := h.post(key, hiBody, "x-mock-completion-tokens", strconv.Itoa(completion))
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == 429 && denied == nil {
					denied = resp
				}
				mu.Unlock()
				// A denial means every shard was empty when tried, and they
				// only empty further: no later request may pass.
				if seen429 && resp.StatusCode == 200 {
					t.Errorf("client %d: request %d admitted after a denial: a shard with room was not tried", c, n)
				}
				seen429 = seen429 || resp.StatusCode == 429
			}
		})
	}
	wg.Wait()
	if statuses[200] != burst || statuses[429] != clients*each-burst {
		t.Fatalf("statuses %v, want exactly %d admitted and the other %d denied", statuses, burst, clients*each-burst)
	}
	// The headers describe the whole limit: 40 requests, none left.
	if denied.Header.Get("x-llmguard-limit") != "all-rpd" || denied.Header.Get("x-ratelimit-limit-requests") != "40" ||
		denied.Header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("denial headers: limit %q, x-ratelimit-limit-requests %q, remaining %q; want all-rpd, 40, 0",
			denied.Header.Get("x-llmguard-limit"), denied.Header.Get("x-ratelimit-limit-requests"), denied.Header.Get("x-ratelimit-remaining-requests"))
	}
	if !strings.Contains(denied.Header.Get("RateLimit-Policy"), `"all-rpd";q=40;`) {
		t.Fatalf("RateLimit-Policy %q, want all-rpd with q=40", denied.Header.Get("RateLimit-Policy"))
	}

	kv := cluster.Client()
	slots := map[int64]bool{}
	for i := range 4 {
		key := fmt.Sprintf("llmguard:{global:%d}:all-rpd", i)
		// 10 a shard, all taken (2 a day of refill: below one request).
		if l := shardLevel(t, kv, key, 10); l >= 1 {
			t.Errorf("%s holds %v, want less than one request left", key, l)
		}
		slot, err := kv.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) != 4 {
		t.Errorf("the 4 shards lie in %d slots, want 4", len(slots))
	}
	// Reconciliation is asynchronous: wait for it to land.
	want := float64(100000 - burst*(hiInput+completion))
	var sum float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sum = 0
		for i := range 4 {
			sum += shardLevel(t, kv, fmt.Sprintf("llmguard:{acme:%d}:acme-tokens:acme", i), 25000)
		}
		if int64(sum) == int64(want) || time.Now().After(deadline) {
			break
		}
	}
	if int64(sum) != int64(want) {
		t.Fatalf("acme-tokens' shards hold %v, want %v: 100000 less %d requests of %d tokens really used", sum, want, burst, hiInput+completion)
	}
}

// Through real sockets, on a Redis store with the node's clock frozen: once
// Redis has denied alice, her next requests are denied from memory (no
// store call, llmguard_denials_cached_total counts them) with the same
// Retry-After, while bob, under no limit, is still admitted.
func TestDenyCacheThroughTheProxy(t *testing.T) {
	srv := redistest.Shared(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: alice-rpd, scope: user, unit: requests, rate: 1, per: 24h, burst: 2, users: [alice]}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 1s, deny_cache: 1s}
`, srv.Addr()))))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })

	takes := func() float64 {
		return h.scrape()["llmguard_store_duration_seconds"].sum(map[string]string{"op": "take"})
	}
	cached := func() float64 {
		return h.scrape()["llmguard_denials_cached_total"].sum(map[string]string{"limit": "alice-rpd"})
	}
	for i := range 2 {
		if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	first, _ := h.post(testKey, hiBody)
	if first.StatusCode != 429 || cached() != 0 {
		t.Fatalf("third request: %d, %v cached; want Redis's own 429", first.StatusCode, cached())
	}
	retry := first.Header.Get("retry-after-ms")
	before := takes()
	for i := range 3 {
		resp, _ := h.post(testKey, hiBody)
		if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-limit") != "alice-rpd" || resp.Header.Get("retry-after-ms") != retry ||
			resp.Header.Get("Retry-After") != first.Header.Get("Retry-After") {
			t.Fatalf("cached denial %d: %d limit %q retry-after-ms %q, want 429 by alice-rpd after %s ms", i,
				resp.StatusCode, resp.Header.Get("x-llmguard-limit"), resp.Header.Get("retry-after-ms"), retry)
		}
	}
	if n := cached(); n != 3 {
		t.Fatalf("llmguard_denials_cached_total{limit=alice-rpd} = %v, want 3", n)
	}
	if after := takes(); after != before {
		t.Fatalf("%v store takes during the cached denials, want none", after-before)
	}
	if resp, _ := h.post("sk-test-bob", hiBody); resp.StatusCode != 200 {
		t.Fatalf("bob: %d, want 200: a denial is cached for its bucket only", resp.StatusCode)
	}
}

// /admin/usage reads a sharded quota as the sum of its shards: its used
// units are what the ledger says was spent, whichever shards paid.
func TestAdminUsageShardedQuota(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "s3cret")
	h := startFlavors(t, fmt.Sprintf(`  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month, shards: 4}
ledger: {file: %q}
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
`, file))
	for range 3 {
		h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-completion-tokens", "20")
	}
	h.do("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "x-mock-completion-tokens", "9")
	req, _ := http.NewRequest(http.MethodGet, h.admin+"/admin/usage?tenant=acme&period=month", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d: %v", resp.StatusCode, err)
	}
	if rep.Requests != 4 || len(rep.Quotas) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if q := rep.Quotas[0]; q.Quota != 1_000_000 || q.Used != rep.Spend.MicroUSD || q.Used <= 0 || q.Remaining != q.Quota-q.Used {
		t.Errorf("quota %+v, want used = ledger spend %d", q, rep.Spend.MicroUSD)
	}
}

// Shards on a store other than a Redis Cluster are a warning, never fatal:
// they spread no load there.
func TestCheckShardsOutsideACluster(t *testing.T) {
	const head = `
upstreams: [{name: o, flavor: openai, base_url: "http://x", no_key: true}]
limits:
  - {name: g, scope: global, unit: requests, rate: 100, per: 1s, shards: 4}
  - {name: u, scope: user, unit: requests, rate: 100, per: 1s}
`
	for _, tc := range []struct {
		store string
		warn  bool
	}{
		{"", true},
		{"store: {backend: redis, redis_url: \"redis://127.0.0.1:1/0\"}", true},
		{"store: {backend: redis_cluster, cluster_addrs: [\"127.0.0.1:1\"]}", false},
	} {
		fs := checkOf(t, head+tc.store+"\n", nil)
		got := found(fs, "limits[0].shards")
		if (len(got) == 1) != tc.warn || len(found(fs, "limits[1].shards")) != 0 || len(Fatal(fs)) != 0 {
			t.Errorf("%q: findings %v, want a warning on limits[0].shards: %v", tc.store, fs, tc.warn)
		}
		if tc.warn && !strings.Contains(got[0].Message, "limit g has 4 shards") {
			t.Errorf("%q: %q", tc.store, got[0].Message)
		}
	}
}
