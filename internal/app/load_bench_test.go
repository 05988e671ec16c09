package app

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// BenchmarkLoad is the load benchmark: chat completions against the mock
// upstream, straight and through llmguard (weigh, three buckets — user,
// tenant, global — reconcile, ledger off), measured in the same run. The
// figure to read is the ratio (x-direct), not the nanoseconds: machines here
// are shared and noisy.
//
//	go test -run XXX -bench Load -benchtime 2000x ./internal/app
func BenchmarkLoad(b *testing.B) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer mock.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: %s, user: alice, tenant: acme}]
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1000000000, per: 1s}
  - {name: tenant-usd, scope: tenant, unit: usd, rate: 1000000, per: 1s}
  - {name: global-rps, scope: global, unit: requests, rate: 1000000, per: 1s}
`, mock.URL, testKey)))
	if err != nil {
		b.Fatal(err)
	}
	proxyURL := serveForBenchmark(b, cfg)
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Summarise the token bucket algorithm in one line."}],"max_tokens":64}`)
	run := func(b *testing.B, base string) {
		client := &fasthttp.Client{MaxConnsPerHost: 64}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for pb.Next() {
				req.Reset()
				req.SetRequestURI(base + "/v1/chat/completions")
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.SetBodyRaw(body)
				if err := client.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 200 {
					b.Errorf("status %d: %v", resp.StatusCode(), err)
					return
				}
			}
		})
	}
	var direct, proxied float64
	b.Run("direct", func(b *testing.B) {
		run(b, mock.URL)
		direct = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("llmguard", func(b *testing.B) {
		run(b, proxyURL)
		proxied = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if direct > 0 {
			b.ReportMetric(proxied/direct, "x-direct")
		}
	})
}

// serveForBenchmark runs llmguard on loopback and returns its base URL.
func serveForBenchmark(b *testing.B, cfg *config.Config) string {
	b.Helper()
	a, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ln, nil) }()
	b.Cleanup(func() { a.Close(); <-done })
	return "http://" + ln.Addr().String()
}
