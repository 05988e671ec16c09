package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// usageApp serves llmguard with a ledger file at file; before, when not
// nil, steers the App before it serves.
func usageApp(t *testing.T, file string, before func(*App)) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: %q, no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
ledger: {file: %q}
`, mock.URL, testKey, file)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(a)
	}
	return serveApp(t, mock, a, nil)
}

// A caller picks its model names (up to 256 bytes, each recorded in the
// ledger): /admin/usage keeps maxUsageModels of them apart and adds up the
// rest under "(other)". It kept 100,000: a ledger of 150,000 calls with
// invented names made a 92 MB answer, which `llmguard usage` (64 MiB at
// most) refused, and some 500 MB held per read.
func TestAdminUsageBoundsCallersModelNames(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	const models = maxUsageModels + 500
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var b strings.Builder
	for i := range models {
		fmt.Fprintf(&b, `{"ts":%q,"request_id":"r-%d","key_id":"k","user":"alice","tenant":"acme","model":"m%07d-%s","flavor":"openai","status":404,"input_tokens":1,"output_tokens":0,"cost_micro_usd":0}`+"\n",
			now, i, i, strings.Repeat("x", 248))
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h := usageApp(t, file, nil)
	resp, err := http.Get(h.admin + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	var requests, other int64
	for _, r := range rep.ByModel {
		requests += r.Requests
		if r.Model == ledger.OtherName {
			other = r.Requests
		}
	}
	if len(rep.ByModel) != maxUsageModels+1 || other != models-maxUsageModels || requests != models || rep.Requests != models {
		t.Errorf("%d model rows (other: %d requests), %d requests in them, %d in all; want %d rows, the last %d models' %d requests under %q, %d in all",
			len(rep.ByModel), other, requests, rep.Requests, maxUsageModels+1, models-maxUsageModels, models-maxUsageModels, ledger.OtherName, models)
	}
}

// /admin/usage reads the ledger one request at a time: a second read
// waits for the first (each holds its breakdowns and answer: 12 reads of
// a 100 MB ledger at once held 1.9 GB), and one that waits past usageWait
// gets 503 with Retry-After.
func TestAdminUsageOneReadAtATime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	inside, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	h := usageApp(t, file, func(a *App) {
		a.usageWait = time.Millisecond
		a.usageHook = func(context.Context) {
			if calls.Add(1) == 1 { // the first read holds on until released
				close(inside)
				<-release
			}
		}
	})
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(h.admin + "/admin/usage")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-inside // the first read holds the slot
	resp, err := http.Get(h.admin + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "another usage read") {
		t.Errorf("second read during the first: %d Retry-After %q %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	close(release)
	if got := <-first; got != 200 {
		t.Errorf("first read: %d, want 200", got)
	}
	resp, err = http.Get(h.admin + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("read after the first ended: %d, want 200", resp.StatusCode)
	}
}

// A usage read whose caller hangs up stops: its context ends (the ledger
// read with it, TestReadFileContextStops) and the next read gets the slot.
// Before, the read ran on context.Background to its end for nobody,
// holding the one slot while other reads waited and got 503.
func TestAdminUsageStopsWhenTheCallerLeaves(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	inside := make(chan struct{})
	stopped := make(chan bool, 1)
	var calls atomic.Int32
	h := usageApp(t, file, func(a *App) {
		a.usageHook = func(ctx context.Context) {
			if calls.Add(1) != 1 {
				return
			}
			close(inside)
			// The bound only ends a failing run.
			select {
			case <-ctx.Done():
				stopped <- true
			case <-time.After(30 * time.Second):
				stopped <- false
			}
		}
	})
	c, err := net.Dial("tcp", strings.TrimPrefix(h.admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("GET /admin/usage HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-inside
	c.Close() // the caller leaves while its read runs
	if !<-stopped {
		t.Fatal("the usage read's context did not end when its caller left")
	}
	resp, err := http.Get(h.admin + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the next read: %d, want 200", resp.StatusCode)
	}
}
