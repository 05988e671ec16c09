//go:build unix

package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestChaosRedisPausedLedgerAgrees freezes Redis (SIGSTOP) under load for
// 1.5 s and continues it, which TestChaosRedisKilledUnderLoad's kill does
// not cover: a frozen Redis keeps its connections open and, once
// continued, runs every take and reconciliation queued meanwhile — calls
// llmguard gave up on at the store timeout, served from the fallback
// (fail-open) or refused (fail-closed), and will settle again. Checked:
//   - the fail-closed tenant answers only 200 or 503 with Retry-After, the
//     fail-open one only 200 or 429, and no request waits on the frozen
//     Redis (slowest ≤ the slowest healthy one + the store timeout + 1 s,
//     go-redis's I/O timeout);
//   - once settled (no reconciliation, fallback charge or ledger record
//     pending), each user's token quota in Redis holds exactly the tokens
//     its ledger records: no late take kept, no delta lost or applied twice.
//
// Live (adv17: 2,000 requests, Redis frozen 3 s, then killed and restarted
// with appendfsync always) the quotas agreed with the ledger to the token.
func TestChaosRedisPausedLedgerAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	const storeTimeout = 25 * time.Millisecond
	ledgerFile := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startConfig(t, mock, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-load, user: loader, tenant: acme}
  - {key: sk-bob, user: bob, tenant: beta}
limits:
  - {name: acme-rps, scope: tenant, unit: requests, rate: 100, per: 1s, burst: 20, tenants: [acme], on_failure: open}
  - {name: beta-rps, scope: tenant, unit: requests, rate: 1000, per: 1s, tenants: [beta], on_failure: closed}
  - {name: user-tok, scope: user, unit: tokens, quota: 100000000, period: day, on_failure: open}
store:
  backend: redis
  redis_url: "redis://%s/0"
  timeout: %s
  nodes: 2
  breaker: {min_calls: 3, open_for: 500ms}
ledger: {file: %q}
`, mock.URL, srv.Addr(), storeTimeout, ledgerFile))
	post := func(key string) sample {
		return postChat(t, h.url, key)
	}
	for range 5 { // warm the pool: a cold first take may overrun the deadline
		post("sk-load")
	}

	var mu sync.Mutex
	var samples []sample
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		key := "sk-load"
		if i >= 4 {
			key = "sk-bob"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= 3000 {
				select {
				case <-stop:
					return
				default:
				}
				s := post(key)
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	paused := time.Now()
	resume := srv.Pause()
	time.Sleep(1500 * time.Millisecond)
	resuming := time.Now()
	resume()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	var healthySlowest, slowest time.Duration
	closed503 := 0
	for _, s := range samples {
		switch {
		case s.key == "sk-bob" && s.status == 503 && s.retryAfter != "":
			closed503++
		case s.key == "sk-bob" && s.status == 200, s.key == "sk-load" && (s.status == 200 || s.status == 429):
		default:
			t.Errorf("%s got %d (Retry-After %q)", s.key, s.status, s.retryAfter)
		}
		d := s.end.Sub(s.start)
		if s.end.Before(paused) {
			healthySlowest = max(healthySlowest, d)
		} else if s.start.After(paused) && s.end.Before(resuming) {
			slowest = max(slowest, d)
		}
	}
	t.Logf("%d requests; frozen 1.5 s: fail-closed 503 %d; slowest request %v (healthy %v)",
		len(samples), closed503, slowest.Round(time.Millisecond), healthySlowest.Round(time.Millisecond))
	if closed503 == 0 {
		t.Error("the fail-closed limit never answered 503 while Redis was frozen: the test froze nothing")
	}
	if bound := healthySlowest + storeTimeout + time.Second; slowest > bound {
		t.Errorf("a request took %v while Redis was frozen, want under %v", slowest, bound)
	}

	waitSettled(t, h)
	time.Sleep(200 * time.Millisecond) // the ledger writer's last flush
	ledgered := ledgerTokens(t, ledgerFile)
	for user, tenant := range map[string]string{"loader": "acme", "bob": "beta"} {
		used := storedQuotaUsed(t, srv, tenant, "user-tok", user)
		if used != ledgered[user] {
			t.Errorf("%s: quota used %d tokens in Redis, the ledger records %d", user, used, ledgered[user])
		}
	}
}

// postChat sends hiBody to the chat endpoint of url with key and records it.
func postChat(t *testing.T, url, key string) sample {
	s := sample{key: key, start: time.Now()}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(hiBody))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return s
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.end, s.status, s.retryAfter = time.Now(), resp.StatusCode, resp.Header.Get("Retry-After")
	s.storeNote = strings.Contains(string(b), "limit store is unavailable")
	return s
}

// ledgerTokens sums each user's input and output tokens over the ledger
// file's records.
func ledgerTokens(t *testing.T, file string) map[string]int64 {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			User         string `json:"user"`
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		sum[r.User] += r.InputTokens + r.OutputTokens
	}
	return sum
}
