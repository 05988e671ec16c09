package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// `llmguard usage` prints the running proxy's report: --json as the
// endpoint gives it, else a table.
func TestUsageCommand(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme}]
limits: [{name: acme-day, scope: tenant, unit: tokens, quota: 100000, period: day}]
ledger: {file: %q}
`, mock.URL, filepath.Join(dir, "ledger.jsonl"))), 0o644)
	bin := binary(t)
	admin := freeAddr(t)
	listen := freeAddr(t)
	srv := exec.Command(bin, "serve", "--config", cfg, "--listen", listen, "--admin-listen", admin)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("llmguard did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	out, err := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--period", "day", "--json").Output()
	if err != nil {
		t.Fatalf("usage --json: %v", err)
	}
	var rep app.UsageReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("usage --json printed %s: %v", out, err)
	}
	if rep.Requests != 3 || len(rep.Quotas) != 1 || rep.Quotas[0].Used != 3*(8+16) {
		t.Errorf("report: %s", out)
	}
	table, err := exec.Command(bin, "usage", "--config", cfg, "--admin", admin, "--tenant", "acme", "--period", "day").Output()
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	for _, want := range []string{"tenant acme", "gpt-4o-mini", "acme-day", "72"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
