package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// A lease on a limit of a memory store is reported: it has no effect there.
func TestCheckLeaseOnMemoryStore(t *testing.T) {
	const limits = `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, tenant: acme}]
limits:
  - {name: plain, scope: tenant, unit: requests, rate: 10, per: 1s}
  - {name: hot, scope: global, unit: requests, rate: 1000, per: 1s, lease: {size: 50}}
`
	fs := found(checkOf(t, limits, nil), "limits[1].lease")
	if len(fs) != 1 || fs[0].Fatal || !strings.Contains(fs[0].Message, "no effect with store.backend memory") {
		t.Errorf("memory store: findings %+v, want one warning at limits[1].lease", fs)
	}
	if fs := found(checkOf(t, limits, nil), "limits[0].lease"); len(fs) != 0 {
		t.Errorf("a limit without a lease: findings %+v", fs)
	}
	redis := limits + "store: {backend: redis, redis_url: \"redis://127.0.0.1:1/0\"}\n"
	if fs := found(checkOf(t, redis, nil), "limits[1].lease"); len(fs) != 0 {
		t.Errorf("redis store: findings %+v, want none", fs)
	}
}

// Through the proxy on a Redis store: a leased limit costs one take for a
// lease's worth of requests, its metrics say so, a reload gives the lease
// back, and so does shutdown.
func TestLeaseThroughTheProxy(t *testing.T) {
	srv := redistest.Shared(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	// No refill to speak of (1 a day), a lease of 100 requests that
	// outlives the test: what Redis holds is exact.
	yaml := baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: tenant-rpm, scope: tenant, unit: requests, rate: 1, per: 24h, burst: 1000, lease: {size: 100, ttl: 10s}}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 1s}
`, srv.Addr()))
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Served here rather than by serveApp: the test closes the App itself
	// (once), to see what shutdown gives back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ln, adm) }()
	closed := false
	t.Cleanup(func() {
		if !closed {
			a.Close()
		}
		<-served
	})
	h := &harness{t: t, mock: mock, app: a, url: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String()}
	const requests = 50
	for i := range requests {
		if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	m := h.scrape()
	limit := map[string]string{"limit": "tenant-rpm"}
	if got := m["llmguard_lease_taken_total"].sum(limit); got != 1 {
		t.Errorf("leases taken %v, want 1", got)
	}
	if got := m["llmguard_lease_served_total"].sum(limit); got != requests-1 {
		t.Errorf("requests served from the lease %v, want %d", got, requests-1)
	}
	if got := m["llmguard_store_duration_seconds"].sum(map[string]string{"op": "take"}); got != 1 {
		t.Errorf("store takes %v for %d requests, want 1", got, requests)
	}
	if got := m["llmguard_lease_units_outstanding"].sum(limit); got != 100-(requests-1) {
		t.Errorf("units outstanding %v, want %d", got, 100-(requests-1))
	}
	key := "llmguard:{acme}:tenant-rpm:acme"
	level := func() float64 {
		v, err := srv.Client().Get(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		f, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
		return f
	}
	if got := level(); int64(got) != 1000-1-100 {
		t.Fatalf("Redis holds %v, want %d: the first request and a lease of 100", got, 1000-1-100)
	}
	// A reload gives the unused units back (through the reconciliation
	// queue: wait for it).
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	waitLevel := func(want int64) {
		t.Helper()
		for i := 0; int64(level()) != want; i++ {
			if i == 500 {
				t.Fatalf("Redis holds %v, want %d", level(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLevel(1000 - requests)
	if got := h.scrape()["llmguard_lease_returned_units_total"].sum(limit); got != 100-(requests-1) {
		t.Errorf("units returned %v, want %d", got, 100-(requests-1))
	}
	// Shutdown gives back the lease the next request takes.
	if resp, _ := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if got := int64(level()); got >= 1000-requests-1 {
		t.Fatalf("Redis holds %d after a request: no lease taken", got)
	}
	closed = true
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitLevel(1000 - requests - 1)
}
