package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"

	"github.com/llmguard/llmguard/internal/logbuf"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// syncBuffer is a log sink safe for the watcher goroutine and the test.
type syncBuffer = logbuf.Buffer

// Editing the config file under load: the new budget applies to the next
// requests, each bucket keeps its usage, no request fails, and an invalid
// file is refused with its field named while the old config stays.
func TestConfigReloadUnderLoad(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	ledgerFile := filepath.Join(dir, "ledger.jsonl")
	write := func(burst string) {
		t.Helper()
		// Write to a temporary file and rename it over, as editors and
		// config-management tools do.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: %s, user: alice, tenant: acme}
  - {key: sk-load, user: loader, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, cached_input_usd_per_mtok: 0.075, output_usd_per_mtok: 0.60}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: %s, users: [alice]}
  - {name: acme-month, scope: tenant, unit: usd, quota: 100, period: month}
ledger: {file: %q}
`, mock.URL, testKey, burst, ledgerFile)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("10000")
	logs := &syncBuffer{}
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(logs, nil)))
	stop, err := h.app.Watch(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	// Steady load from 4 clients through every reload: chat completions,
	// each priced from the usage the upstream reported.
	price := policy.USDPerMTok{Input: 0.15, CachedInput: 0.075, Output: 0.60}.Price()
	var failures atomic.Int64
	var sent, expectMicroUSD atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 100000; n++ {
				select {
				case <-done:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
				req.Header.Set("Authorization", "Bearer sk-load")
				req.Header.Set("x-mock-completion-tokens", strconv.Itoa(1+n%40))
				resp, err := http.DefaultClient.Do(req)
				sent.Add(1)
				if err != nil {
					failures.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
					continue
				}
				expectMicroUSD.Add(price.MicroUSD(spec.Usage{InputTokens: intField(t, string(b), "prompt_tokens"),
					OutputTokens: intField(t, string(b), "completion_tokens")}))
			}
		}()
	}

	resp, _ := h.post(testKey, hiBody) // uses hiInput + 100 of 10000
	if r := remainingTokens(t, resp.Header); r != 10000-hiInput-100 {
		t.Fatalf("remaining %d", r)
	}
	limitNow := func() string {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("x-ratelimit-limit-tokens") + "/" + resp.Header.Get("x-ratelimit-remaining-tokens")
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for got := limitNow(); got != want; got = limitNow() {
			if time.Now().After(deadline) {
				t.Fatalf("limit/remaining = %s, want %s after the edit", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Raised: the new capacity, the usage kept (the first call's 8 + 16).
	write("50000")
	waitFor(fmt.Sprintf("50000/%d", 10000-hiInput-16))
	// Lowered below the usage kept: the level clamps to the new capacity.
	write("5000")
	waitFor("5000/5000")

	// An invalid file is refused; the old config stays in force.
	os.WriteFile(path, []byte("limits: [{name: user-tpm, scope: org}]\n"), 0o644)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "limits[0].scope") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "limits[0].scope") {
		t.Errorf("the refused reload did not log the bad field:\n%s", logs.String())
	}
	if got := limitNow(); got != "5000/5000" {
		t.Errorf("after an invalid edit: %s, want the old config (5000/5000)", got)
	}
	close(done)
	wg.Wait()
	if failures.Load() != 0 {
		t.Errorf("%d of %d requests failed during the reloads", failures.Load(), sent.Load())
	}
	// The ledger holds every forwarded request: its total is the sum of the
	// upstream-reported usage at the model's prices, to the micro-dollar.
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(ledgerFile)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	var loadRecs int64
	for _, r := range recs {
		if r.User == "loader" {
			total += r.CostMicroUSD
			loadRecs++
		}
	}
	if loadRecs != sent.Load() || total != expectMicroUSD.Load() {
		t.Errorf("ledger: %d records totalling %d µUSD; the load sent %d requests whose usage costs %d µUSD",
			loadRecs, total, sent.Load(), expectMicroUSD.Load())
	}
	t.Logf("%d requests during 3 reloads, none failed; ledger total %d µUSD", sent.Load(), total)
}

// A config mounted the way Kubernetes mounts a ConfigMap (c.yaml →
// ..data/c.yaml, ..data → ..v1, swapped atomically to ..v2) is reloaded.
func TestConfigMapStyleSwapIsReloaded(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	version := func(name, burst string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "c.yaml"), []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: %s, user: alice, tenant: acme}]
limits: [{name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: %s}]
`, mock.URL, testKey, burst)), 0o644)
	}
	version("..v1", "10000")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join("..data", "c.yaml"), filepath.Join(dir, "c.yaml"))
	h := startFile(t, mock, filepath.Join(dir, "c.yaml"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	stop, err := h.app.Watch(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	version("..v2", "777")
	os.Symlink("..v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "..v1"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[],"max_tokens":1}`)
		if resp.Header.Get("x-ratelimit-limit-tokens") == "777" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit still %s after the ConfigMap swap, want 777", resp.Header.Get("x-ratelimit-limit-tokens"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
