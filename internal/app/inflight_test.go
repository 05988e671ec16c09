package app

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// An in-flight limit and a shadow limit on the Redis store, through real
// sockets: a running stream holds the user's one slot (a sorted set of one
// holder in Redis), a second request is denied 429 naming the limit, the
// slot is released when the client leaves mid-stream, and a shadow token
// limit's bucket is taken in Redis without ever denying.
func TestInFlightAndShadowOnRedis(t *testing.T) {
	srv := redistest.Shared(t)
	h := start(t, fmt.Sprintf(`
limits:
  - {name: one, scope: user, unit: concurrent, max: 1}
  - {name: next-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 300, shadow: true}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 100ms}
`, srv.Addr()))
	rdb := srv.Client()
	ctx := context.Background()
	const slots = "llmguard:{acme}:one:alice"
	held := func() int64 {
		n, err := rdb.ZCard(ctx, slots).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-mock-delay-ms", "100")
	req.Header.Set("x-mock-completion-tokens", "200")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	if !strings.Contains(resp.Header.Get("x-llmguard-shadow"), `"next-tpm";r=`) {
		t.Errorf("x-llmguard-shadow = %q", resp.Header.Get("x-llmguard-shadow"))
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("%d holders in Redis while the stream runs, want 1", n)
	}
	if ttl := rdb.PTTL(ctx, slots).Val(); ttl <= 10*time.Minute || ttl > 10*time.Minute+32*time.Second {
		t.Errorf("slot key TTL %v, want the default lease 10m30s plus 1s", ttl)
	}

	second, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`)
	if second.StatusCode != 429 || second.Header.Get("Retry-After") != "1" || !strings.Contains(body, "limit one") {
		t.Fatalf("second request: %d %s, want 429 naming the limit", second.StatusCode, body)
	}

	conn.Close()
	for i := 0; i < 500 && held() != 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := held(); n != 0 {
		t.Fatalf("%d holders after the client left, want 0", n)
	}
	// The shadow bucket (300 tokens) would deny a request of 500 tokens:
	// it is served, and marked.
	third, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":500}`)
	if third.StatusCode != 200 || !strings.Contains(third.Header.Get("x-llmguard-shadow"), "would-deny") {
		t.Fatalf("third request: %d %q %s, want 200 with a would-deny shadow verdict", third.StatusCode, third.Header.Get("x-llmguard-shadow"), body)
	}
}
