package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// blockRedis blocks srv for d with a script that spins on TIME (Redis 7
// refuses DEBUG SLEEP by default; the script holds Redis's one thread just
// the same), from a client of its own. It returns when Redis answers again.
func blockRedis(srv *redistest.Server, d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
	defer c.Close()
	return c.Eval(context.Background(), `
local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1`, nil, d.Microseconds()).Err()
}

// TestHostileStoreSlowRedisLeaksNothing blocks llmguard's own redis-server
// for half a second under load. The takes sent meanwhile time out on
// llmguard's side (50 ms, the default) and are answered 503 (the limits
// fail closed) while Redis still holds them, and runs them once it is free:
// each of those reserved units in Redis for a request that was refused.
// llmguard voids them by request id, so once the store is back and the
// reconciler has settled, Redis holds exactly what the admitted requests
// were charged: a daily request quota counts the 200s, no more (no leak)
// and no fewer (no refund twice, though voids that timed out themselves
// were retried); a token bucket holds its burst minus the tokens the
// admitted requests used. Keyspace notifications of the take markers show
// that some takes were indeed applied after they had timed out: their
// marker was set twice, "t" by the take and "v" by the void.
func TestHostileStoreSlowRedisLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("hostile store test")
	}
	ctx := context.Background()
	srv := redistest.Start(t)
	kv := srv.Client()
	const (
		burst      = 10_000_000
		completion = 30 // output tokens of every answer
		block      = 500 * time.Millisecond
	)
	h := start(t, fmt.Sprintf(`
limits:
  - {name: alice-day, scope: user, unit: requests, quota: 1000000, period: day, users: [alice], on_failure: closed}
  - {name: alice-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: %d, users: [alice], on_failure: closed}
store:
  backend: redis
  redis_url: "redis://%s/0"
  timeout: 50ms
  breaker: {open_for: 300ms}
`, burst, srv.Addr()))

	// Every write of a take marker, by key.
	if err := kv.ConfigSet(ctx, "notify-keyspace-events", "K$").Err(); err != nil {
		t.Fatal(err)
	}
	sub := kv.PSubscribe(ctx, "__keyspace@0__:llmguard:{acme}::tk:*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		markMu   sync.Mutex
		markSets = map[string]int{} // request id -> SETs of its marker
	)
	go func() {
		for m := range sub.Channel() {
			if m.Payload == "set" {
				id := m.Channel[strings.LastIndex(m.Channel, ":")+1:]
				markMu.Lock()
				markSets[id]++
				markMu.Unlock()
			}
		}
	}()

	type result struct {
		id     string
		status int
	}
	var (
		mu      sync.Mutex
		results []result
	)
	send := func() {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("x-mock-completion-tokens", strconv.Itoa(completion))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		results = append(results, result{resp.Header.Get("x-llmguard-request-id"), resp.StatusCode})
		mu.Unlock()
	}
	// Warm up: concurrent requests, so that llmguard's pool holds
	// connections past their handshake (a new connection's handshake would
	// time out during the block before its take is even sent).
	for range 3 {
		var wg sync.WaitGroup
		for range 24 {
			wg.Add(1)
			go func() { defer wg.Done(); send() }()
		}
		wg.Wait()
	}

	// Each round blocks Redis under load. The scenario needs a take that
	// Redis ran after llmguard had given up on it; on a loaded machine a
	// round may send none into the block (the breaker opens first), so
	// rounds repeat, at most four, until one did. What is checked after
	// holds for every round together.
	var ok, refused, other, appliedThenVoided int
	var st bucket.AsyncStats
	for round := 1; ; round++ {
		// Load while Redis is blocked, and a little after.
		blocked := make(chan error, 1)
		go func() { blocked <- blockRedis(srv, block) }()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 500; n++ {
					select {
					case <-stop:
						return
					default:
					}
					send()
				}
			}()
		}
		if err := <-blocked; err != nil {
			t.Fatalf("blocking Redis: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()

		// Settle: the breaker closed, every reconciliation and void applied.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := readyz(t, h.admin)
			if r["breaker"] == "closed" && r["reconcile_pending"] == float64(0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not settled 10s after Redis answered again: %v", r)
			}
		}

		ok, refused, other = 0, 0, 0
		statusOf := map[string]int{}
		for _, r := range results {
			statusOf[r.id] = r.status
			switch r.status {
			case 200:
				ok++
			case 503:
				refused++
			default:
				other++
			}
		}
		st = h.app.stores.async.Stats()
		markMu.Lock()
		appliedThenVoided = 0
		for id, sets := range markSets {
			if statusOf[id] != 503 {
				continue
			}
			// A lone take sets its marker key ("t", then the void's "v"); a
			// take committed in a batch records its id in the epoch's taken
			// set instead (bucket.NewRequestID's ids), and only the void sets
			// the key.
			if sets == 2 || sets == 1 && inTakenSet(ctx, t, kv, id) {
				appliedThenVoided++
			}
		}
		markMu.Unlock()
		if appliedThenVoided > 0 && refused > 0 || round == 4 {
			t.Logf("round %d of at most 4", round)
			break
		}
	}
	t.Logf("%d requests: %d admitted, %d refused (503), %d other; %d voids queued, %d takes applied by Redis after timing out; reconciler %+v",
		len(results), ok, refused, other, st.Voids, appliedThenVoided, st)
	if other != 0 {
		t.Errorf("%d answers neither 200 nor 503", other)
	}
	if refused == 0 {
		t.Fatal("no request was refused: Redis was not seen blocked")
	}
	if st.Voids == 0 {
		t.Error("no take was voided")
	}
	if appliedThenVoided == 0 {
		t.Error("no refused request's take was applied by Redis after it timed out, then voided")
	}
	if st.Dropped != 0 {
		t.Errorf("%d reconciliations or voids dropped", st.Dropped)
	}

	// The quota counts the admitted requests, exactly.
	day := time.Now().UTC().Truncate(24 * time.Hour)
	q, err := kv.Get(ctx, "llmguard:{acme}:alice-day:alice").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used, window int64
	if _, err := fmt.Sscanf(q, "q %d %d", &used, &window); err != nil {
		t.Fatalf("quota %q: %v", q, err)
	}
	if window != day.UnixMicro() {
		t.Logf("the day changed during the test (window %d): skipping the quota check", window)
	} else if used != int64(ok) {
		t.Errorf("quota used %d in Redis, want %d (the admitted requests): %+d leaked", used, ok, used-int64(ok))
	}
	// The token bucket holds its burst minus what the admitted requests
	// used (8 input + 30 output tokens each, reconciled from the 108
	// reserved); it refills 1 token a day, under 0.01 over the test.
	v, err := kv.Get(ctx, "llmguard:{acme}:alice-tokens:alice").Result()
	if err != nil {
		t.Fatal(err)
	}
	level, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(burst - ok*(hiInput+completion)); level < want || level > want+0.01 {
		t.Errorf("token bucket at %.3f in Redis, want %.0f (burst − %d admitted × %d tokens): %+.0f tokens leaked",
			level, want, ok, hiInput+completion, want-level)
	}
}

// inTakenSet reports whether request id (of bucket.NewRequestID's form: the
// Unix second in its first 8 hex digits) is a member of its epoch's set of
// takes committed in a batch, "llmguard:{acme}::tkt:<second/10>".
func inTakenSet(ctx context.Context, t *testing.T, kv *redis.Client, id string) bool {
	t.Helper()
	if len(id) < 8 {
		return false
	}
	sec, err := strconv.ParseUint(id[:8], 16, 32)
	if err != nil {
		return false
	}
	ok, err := kv.SIsMember(ctx, "llmguard:{acme}::tkt:"+strconv.FormatUint(sec/10, 10), id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
