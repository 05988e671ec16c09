package app

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/fakeclock"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// waitRPS is one request a second per key, burst 1, held up to 2s.
const waitRPS = `
limits:
  - name: key-rps
    scope: key
    unit: requests
    rate: 1
    per: 1s
    burst: 1
    on_limit: wait
    max_wait: 2s
`

// startWaiting runs llmguard on a manual clock (the memory store's, the
// quota periods' and the waiting timers'), with tail's limits.
func startWaiting(t *testing.T, tail string) (*harness, *fakeclock.Clock) {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, tail)))
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	a, err := newAppTimed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now, clock.After)
	if err != nil {
		t.Fatal(err)
	}
	return serveApp(t, mock, a, nil), clock
}

// until polls cond every millisecond for at most 60s (a bound on the
// test's progress far above any step it waits for, not a timing
// assertion) and fails the test with what when it never holds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// answer is one response's status, wait header and arrival order.
type answer struct {
	status int
	wait   string
	retry  string
	seq    int
}

// postAsync sends hiBody with key and delivers its answer on the channel.
func (h *harness) postAsync(key string) <-chan answer {
	c := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c <- answer{status: -1}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c <- answer{status: resp.StatusCode, wait: resp.Header.Get("x-llmguard-wait-ms"), retry: resp.Header.Get("Retry-After")}
	}()
	return c
}

// Requests denied by a limit that waits are held in arrival order and
// admitted when the bucket refills, each told how long it waited; the
// first request, never held, carries no wait header.
func TestWaitAdmitsInArrivalOrder(t *testing.T) {
	h, clock := startWaiting(t, waitRPS)
	waits := h.app.Proxy.Waits()
	first := <-h.postAsync(testKey)
	if first.status != 200 || first.wait != "" {
		t.Fatalf("first request: %+v, want 200 without x-llmguard-wait-ms", first)
	}
	b := h.postAsync(testKey)
	until(t, "the second request waits, sleeping as its queue's head", func() bool { return waits.Len() == 1 && clock.Timers() == 1 })
	c := h.postAsync(testKey)
	var early *answer
	until(t, "the third request queues behind it (its deadline timer)", func() bool {
		select {
		case a := <-c:
			early = &a
			return true
		default:
		}
		return waits.Len() == 2 && clock.Timers() == 2
	})
	if early != nil {
		clock.Advance(time.Second)
		t.Fatalf("third request answered at once: %+v (waiting %d, timers %d)", *early, waits.Len(), clock.Timers())
	}

	clock.Advance(time.Second) // one request refills: the head's
	got := <-b
	if got.status != 200 || got.wait != "1000" {
		t.Fatalf("second request: %+v, want 200 after waiting 1000ms", got)
	}
	select {
	case got := <-c:
		t.Fatalf("third request answered before the bucket refilled again: %+v", got)
	default:
	}
	until(t, "the third request is the head, sleeping", func() bool { return waits.Len() == 1 && clock.Timers() == 1 })
	clock.Advance(time.Second)
	if got := <-c; got.status != 200 || got.wait != "2000" {
		t.Fatalf("third request: %+v, want 200 after waiting 2000ms", got)
	}
	m := h.metrics()
	if !strings.Contains(m, `llmguard_wait_seconds_count{outcome="admitted"} 2`) ||
		!strings.Contains(m, `llmguard_wait_seconds_sum{outcome="admitted"} 3`) {
		t.Errorf("wait histogram: want 2 admitted waits summing to 3s:\n%s", grepLines(m, "llmguard_wait_seconds_"))
	}
	if waits.Len() != 0 {
		t.Errorf("%d still waiting", waits.Len())
	}
}

// A wait longer than max_wait is the usual 429 at once, never held; so is
// a too-large request.
func TestWaitBeyondMaxWaitIsRefusedAtOnce(t *testing.T) {
	h, _ := startWaiting(t, `
limits:
  - name: key-slow
    scope: key
    unit: requests
    rate: 1
    per: 10s
    burst: 1
    on_limit: wait
    max_wait: 2s
  - name: key-tokens
    scope: key
    unit: tokens
    rate: 100
    per: 1s
    burst: 100
    on_limit: wait
    max_wait: 2s
`)
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`
	if resp, body := h.post(testKey, big); resp.StatusCode != 429 || resp.Header.Get("x-llmguard-wait-ms") != "" {
		t.Fatalf("too large: %d %q %s, want 429 at once", resp.StatusCode, resp.Header.Get("x-llmguard-wait-ms"), body)
	}
	if resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
	if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-wait-ms") != "" || resp.Header.Get("Retry-After") != "10" {
		t.Fatalf("beyond max_wait: %d wait=%q retry=%q, want 429, no wait, Retry-After 10", resp.StatusCode,
			resp.Header.Get("x-llmguard-wait-ms"), resp.Header.Get("Retry-After"))
	}
	if n := h.app.Proxy.Waits().Len(); n != 0 {
		t.Errorf("%d waiting", n)
	}
}

// A request that has waited max_wait without its turn is refused then.
func TestWaitQueuedPastMaxWaitIsRefused(t *testing.T) {
	h, clock := startWaiting(t, waitRPS)
	waits := h.app.Proxy.Waits()
	<-h.postAsync(testKey)
	b := h.postAsync(testKey)
	until(t, "second waits", func() bool { return waits.Len() == 1 && clock.Timers() == 1 })
	clock.Advance(500 * time.Millisecond)
	c := h.postAsync(testKey) // deadline 2.5s: the head leaves at 1s, it may wait till 2s
	until(t, "third queues", func() bool { return waits.Len() == 2 && clock.Timers() == 2 })
	d := h.postAsync(testKey) // deadline 2.5s too: after c, it needs till 3s
	until(t, "fourth queues", func() bool { return waits.Len() == 3 && clock.Timers() == 3 })
	clock.Advance(500 * time.Millisecond)
	if got := <-b; got.status != 200 || got.wait != "1000" {
		t.Fatalf("second: %+v", got)
	}
	until(t, "third is head", func() bool { return waits.Len() == 2 && clock.Timers() == 2 })
	clock.Advance(time.Second) // t=2s: c admitted; d's wait would end at 3s > 2.5s
	if got := <-c; got.status != 200 || got.wait != "1500" {
		t.Fatalf("third: %+v, want 200 after 1500ms", got)
	}
	got := <-d
	if got.status != 429 || got.wait != "1500" || got.retry != "1" {
		t.Fatalf("fourth: %+v, want 429 after waiting 1500ms, Retry-After 1", got)
	}
	if !strings.Contains(h.metrics(), `llmguard_wait_seconds_count{outcome="limited"} 1`) {
		t.Errorf("limited wait not counted:\n%s", grepLines(h.metrics(), "llmguard_wait_seconds_count"))
	}
}

// A full queue refuses at once (429), and its bound is per bucket: another
// key's bucket still queues.
func TestWaitQueueFullRefusesAtOnce(t *testing.T) {
	h, clock := startWaiting(t, waitRPS+"wait_queue: {per_bucket: 1, total: 2}\n")
	waits := h.app.Proxy.Waits()
	<-h.postAsync(testKey)
	b := h.postAsync(testKey)
	until(t, "second waits", func() bool { return waits.Len() == 1 })
	resp, _ := h.post(testKey, hiBody)
	if resp.StatusCode != 429 || resp.Header.Get("x-llmguard-wait-ms") != "" {
		t.Fatalf("queue full: %d wait=%q, want 429 at once", resp.StatusCode, resp.Header.Get("x-llmguard-wait-ms"))
	}
	<-h.postAsync("sk-test-bob")
	bob := h.postAsync("sk-test-bob")
	until(t, "bob's request waits in its own queue", func() bool { return waits.Len() == 2 })
	clock.Advance(time.Second)
	if got := <-b; got.status != 200 {
		t.Fatalf("second: %+v", got)
	}
	if got := <-bob; got.status != 200 {
		t.Fatalf("bob: %+v", got)
	}
	if !strings.Contains(h.metrics(), `llmguard_wait_seconds_count{outcome="full"} 1`) {
		t.Errorf("full not counted:\n%s", grepLines(h.metrics(), "llmguard_wait_seconds_count"))
	}
}

// A client that leaves while its request waits is dropped: its queue slot
// is freed, nothing is taken, and the next request is the head at once.
func TestWaitClientThatLeavesIsDropped(t *testing.T) {
	h, clock := startWaiting(t, waitRPS)
	waits := h.app.Proxy.Waits()
	<-h.postAsync(testKey)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testKey, len(hiBody), hiBody)
	until(t, "the raw request waits", func() bool { return waits.Len() == 1 })
	c := h.postAsync(testKey)
	until(t, "the next queues behind it", func() bool { return waits.Len() == 2 })
	conn.Close()
	until(t, "the departed client's request is dropped", func() bool { return waits.Len() == 1 })
	until(t, "the next is the head, sleeping", func() bool { return clock.Timers() == 1 })
	clock.Advance(time.Second)
	if got := <-c; got.status != 200 {
		t.Fatalf("next: %+v", got)
	}
	m := h.metrics()
	if !strings.Contains(m, `llmguard_wait_seconds_count{outcome="left"} 1`) ||
		!strings.Contains(m, `outcome="left"`) || !strings.Contains(m, `llmguard_requests_total{flavor="openai",limit="",model="gpt-4o-mini",outcome="left"} 1`) {
		t.Errorf("left not counted:\n%s", grepLines(m, `outcome="left"`))
	}
}

// A client still connected keeps its place: a pipelined byte is not a
// departure.
func TestWaitRawClientStaysQueued(t *testing.T) {
	h, clock := startWaiting(t, waitRPS)
	waits := h.app.Proxy.Waits()
	<-h.postAsync(testKey)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testKey, len(hiBody), hiBody)
	until(t, "waits", func() bool { return waits.Len() == 1 && clock.Timers() == 1 })
	clock.Advance(time.Second)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-llmguard-wait-ms") != "1000" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("x-llmguard-wait-ms"))
	}
}

// On Redis and a 3-master Redis Cluster (the store's own clock, real
// time), a request denied for a wait is held and admitted, its wait
// reported within max_wait. The store's clock is Redis's TIME, which no
// test can hold still, so the rate is slow enough that no scheduling delay
// of a loaded machine matters: one request a second, burst 1, so of three
// requests sent together after the first, the k-th can only escape its
// wait if it reaches Redis k seconds late. At least two must wait (the
// test fails only if the requests were delayed by over 2 s), and none is
// refused.
func TestWaitOnRedis(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Shared(t)
		testWaitOnStore(t, fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", timeout: 200ms}\n", srv.Addr()))
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.SharedCluster(t, 3)
		testWaitOnStore(t, fmt.Sprintf("store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 1s}\n", strings.Join(c.Addrs(), ", ")))
	})
}

func testWaitOnStore(t *testing.T, store string) {
	h := start(t, `
limits:
  - name: key-fast
    scope: key
    unit: requests
    rate: 1
    per: 1s
    burst: 1
    on_limit: wait
    max_wait: 10s
`+store)
	first := <-h.postAsync(testKey)
	if first.status != 200 {
		t.Fatalf("first: %+v", first)
	}
	var chans []<-chan answer
	for range 3 {
		chans = append(chans, h.postAsync(testKey))
	}
	waited := 0
	for i, c := range chans {
		got := <-c
		if got.status != 200 {
			t.Fatalf("request %d: %+v, want 200", i, got)
		}
		if got.wait == "" {
			continue
		}
		waited++
		var ms int
		fmt.Sscan(got.wait, &ms)
		if ms <= 0 || ms > 10000 {
			t.Fatalf("request %d waited %dms, want (0, 10000]", i, ms)
		}
	}
	if waited < 2 {
		t.Fatalf("%d of 3 requests waited, want at least 2", waited)
	}
	if n := h.app.Proxy.Waits().Len(); n != 0 {
		t.Errorf("%d waiting", n)
	}
}

// Shutdown does not hold waiting requests until their max_wait: Close
// answers them with their 429 at once (the manual clock never moves here,
// so without that Close would never return).
func TestCloseAnswersWaiters(t *testing.T) {
	h, clock := startWaiting(t, waitRPS)
	waits := h.app.Proxy.Waits()
	if first := <-h.postAsync(testKey); first.status != 200 {
		t.Fatalf("first request: %+v", first)
	}
	held := h.postAsync(testKey)
	until(t, "the second request waits", func() bool { return waits.Len() == 1 && clock.Timers() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- h.app.Close() }()
	select {
	case got := <-held:
		if got.status != 429 || got.retry == "" {
			t.Errorf("held request at shutdown: %+v, want 429 with Retry-After", got)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Close left the waiting request held")
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close never returned")
	}
}
