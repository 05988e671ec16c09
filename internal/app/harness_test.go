package app

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// testKey is the virtual key every harness config knows.
const testKey = "sk-test-alice"

// harness is llmguard in front of the mock upstream, both on loopback.
type harness struct {
	t     *testing.T
	mock  *mockllm.Server
	app   *App
	url   string // proxy base URL, no trailing slash
	admin string // admin base URL
}

// start runs the mock and llmguard with tail appended to a base config
// (listeners, the mock upstream, two keys of tenant acme, gpt-4o-mini
// prices); tail holds the limits: section and anything else. The upstream
// key is "sk-upstream".
func start(t *testing.T, tail string) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	return startWith(t, mock, mock.URL, tail)
}

func startWith(t *testing.T, mock *mockllm.Server, upstreamURL, tail string) *harness {
	t.Helper()
	return startConfig(t, mock, baseConfig(t, upstreamURL, tail))
}

// startFrozen is start on a clock that never moves: buckets never refill, so
// what a test admits is exact, whatever the machine's speed.
func startFrozen(t *testing.T, tail string) *harness {
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
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	return startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
}

// baseConfig is the harness's config with tail appended; it sets the
// upstream key's environment variable.
func baseConfig(t *testing.T, upstreamURL, tail string) string {
	t.Helper()
	t.Setenv("LLMGUARD_TEST_UPSTREAM_KEY", "sk-upstream")
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
max_body_bytes: 65536
upstreams:
  - name: mock
    flavor: openai
    base_url: %s
    api_key_env: LLMGUARD_TEST_UPSTREAM_KEY
keys:
  - key: %s
    user: alice
    tenant: acme
    plan: free
  - key: sk-test-bob
    user: bob
    tenant: acme
    plan: free
models:
  gpt-4o-mini:
    encoding: o200k_base
    input_usd_per_mtok: 0.15
    cached_input_usd_per_mtok: 0.075
    output_usd_per_mtok: 0.60
    default_max_output_tokens: 256
%s`, upstreamURL, testKey, tail)
}

// twoFlavorConfig is a config with an OpenAI and an Anthropic upstream both
// on upstreamURL (no key), alice's key, gpt-4o-mini and claude-sonnet-4-5
// priced, and one token bucket of alice's named limit holding burst
// tokens, refilled at 1 a day: a test through it sees what each call was
// charged.
func twoFlavorConfig(upstreamURL, limit string, burst int) string {
	return twoFlavorHead(upstreamURL) + userTokensLimit(limit, burst)
}

// twoFlavorHead is twoFlavorConfig without its limits: section, for a
// test that writes its own.
func twoFlavorHead(upstreamURL string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
keys:
  - {key: %[2]s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15}
`, upstreamURL, testKey)
}

// claudeConfig is a config with an Anthropic upstream alone on upstreamURL
// (no key), alice's key, no model priced, and one token bucket of alice's
// named limit holding burst tokens, refilled at 1 a day.
func claudeConfig(upstreamURL, limit string, burst int) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: claude, flavor: anthropic, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
`, upstreamURL, testKey) + userTokensLimit(limit, burst)
}

// userTokensLimit is a limits: section of one token bucket of alice's
// (scope user) named limit holding burst tokens, refilled at 1 a day.
func userTokensLimit(limit string, burst int) string {
	return fmt.Sprintf("limits:\n  - {name: %s, scope: user, unit: tokens, rate: 1, per: 24h, burst: %d}\n", limit, burst)
}

// startConfig runs llmguard on a whole YAML config whose listeners are
// replaced by free loopback ports.
func startConfig(t *testing.T, mock *mockllm.Server, yaml string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return startParsed(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// startFile runs llmguard on the config file at path.
func startFile(t *testing.T, mock *mockllm.Server, path string, log *slog.Logger) *harness {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startParsed(t, mock, cfg, log)
}

func startParsed(t *testing.T, mock *mockllm.Server, cfg *config.Config, log *slog.Logger) *harness {
	t.Helper()
	return startClock(t, mock, cfg, log, nil)
}

// startClock runs llmguard with now as the memory store's and the quota
// periods' clock.
func startClock(t *testing.T, mock *mockllm.Server, cfg *config.Config, log *slog.Logger, now func() time.Time) *harness {
	t.Helper()
	a, err := newApp(cfg, log, now)
	if err != nil {
		t.Fatal(err)
	}
	return serveApp(t, mock, a, nil)
}

// serveApp serves a on free loopback ports until the test ends; wrap, when
// not nil, wraps the proxy listener (to shape the sockets it accepts).
func serveApp(t *testing.T, mock *mockllm.Server, a *App, wrap func(net.Listener) net.Listener) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := ln
	if wrap != nil {
		served = wrap(ln)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(served, adm) }()
	t.Cleanup(func() {
		a.Close()
		<-done
	})
	return &harness{t: t, mock: mock, app: a, url: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String()}
}

// serveLogged starts cfg's app behind serveApp, its log (text, level Info)
// written to the returned buffer for the test to read.
func serveLogged(t *testing.T, mock *mockllm.Server, cfg *config.Config) (*harness, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveApp(t, mock, a, nil), logs
}

// post sends a raw chat request and returns the response with its body read.
func (h *harness) post(key, body string, headers ...string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(b)
}

// metrics returns the admin /metrics text.
func (h *harness) metrics() string {
	h.t.Helper()
	resp, err := http.Get(h.admin + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
