package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/lua"
)

// exitCode runs bin with args and returns its exit status and output.
func exitCode(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatal(err)
	return -1, ""
}

// Usage errors exit 2; a command that fails exits 1; help and version 0.
func TestExitStatus(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("limits: [{name: x, scope: nobody}]\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"frobnicate"}, 2, "unexpected argument frobnicate"},
		{[]string{"serve", "--no-such-flag"}, 2, "unknown flag --no-such-flag"},
		{[]string{"serve", "--log-level", "loud"}, 2, "--log-level must be one of"},
		{[]string{"validate"}, 0, "embedded default config: OK"}, // what serve runs without --config
		{[]string{"validate", "extra.yaml"}, 2, "unexpected argument extra.yaml"},
		{[]string{"usage", "--config", bad, "--period", "fortnight"}, 2, "--period must be one of"},
		{[]string{"report", "--tenant", "acme", "--month", "2026-13", "--ledger", bad}, 2, "month must be YYYY-MM"},
		{[]string{"report", "--tenant", "acme", "--month", "2026-11", "--ledger", bad, "--timezone", "Mars/Olympus"}, 2, "unknown --timezone"},
		{[]string{"validate", "--config", bad}, 1, "invalid configuration"},
		{[]string{"validate", "--config", filepath.Join(dir, "missing.yaml")}, 1, "missing.yaml"},
		{[]string{"--help"}, 0, "Usage: llmguard"},
		{[]string{"version"}, 0, "llmguard "},
	} {
		code, out := exitCode(t, bin, tc.args...)
		if code != tc.want || !strings.Contains(out, tc.says) {
			t.Errorf("llmguard %s: exit %d, want %d saying %q\n%s", strings.Join(tc.args, " "), code, tc.want, tc.says, out)
		}
	}
}

// `llmguard version` names the version given at link time, the commit and
// the Go release.
func TestVersionCommand(t *testing.T) {
	bin := binary(t) // linked with testVersion
	code, out := exitCode(t, bin, "version")
	// The revision Go stamped (none in a checkout Go cannot read, such as
	// some git worktrees): the version line must name it.
	var rev string
	meta, _ := exec.Command("go", "version", "-m", bin).Output()
	for _, l := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if code != 0 || !strings.HasPrefix(out, "llmguard "+testVersion+" (") || !strings.Contains(out, "go1.") || !strings.Contains(out, "scripts "+lua.LibraryName) {
		t.Fatalf("version: exit %d %q", code, out)
	}
	if rev != "" && !strings.Contains(out, "commit "+rev) {
		t.Errorf("version %q does not name the commit %s", out, rev)
	}
	t.Logf("%s(stamped revision %q)", out, rev)
}

// The start-up log names the config source, every upstream and the store
// (a Redis URL's password redacted); --log-level hides what is below it.
func TestStartupLog(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	admin := freeAddr(t)
	os.WriteFile(cfg, []byte(`
listen: 127.0.0.1:0
admin_listen: `+admin+`
upstreams:
  - {name: primary, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "http://127.0.0.1:2", no_key: true}
store: {backend: redis, redis_url: "redis://:hunter2-secret@127.0.0.1:1/0"}
`), 0o600)
	lines := serveLines(t, bin, admin, "serve", "--config", cfg)
	var start string
	for _, l := range lines {
		if strings.Contains(l, "llmguard starting") {
			start = l
		}
	}
	for _, want := range []string{"config=" + cfg, "primary=openai:http://127.0.0.1:1", "claude=anthropic:http://127.0.0.1:2", "redis redis://:xxxxx@127.0.0.1:1/0", "version=", "redis_library=" + lua.LibraryName} {
		if !strings.Contains(start, want) {
			t.Errorf("start-up line %q does not name %q", start, want)
		}
	}
	if strings.Contains(strings.Join(lines, "\n"), "hunter2-secret") {
		t.Error("the Redis password reached the log")
	}
	quiet := serveLines(t, bin, admin, "serve", "--config", cfg, "--log-level", "error")
	if len(quiet) != 1 || quiet[0] != "" {
		t.Errorf("--log-level error: %d lines logged by a clean start and stop:\n%s", len(quiet), strings.Join(quiet, "\n"))
	}
	for _, l := range quiet {
		if strings.Contains(l, "level=INFO") || strings.Contains(l, "level=WARN") {
			t.Errorf("--log-level error let through %q", l)
		}
	}
	admin = freeAddr(t)
	def := serveLines(t, bin, admin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", admin)
	if s := strings.Join(def, "\n"); !strings.Contains(s, "config=\"embedded default\"") || !strings.Contains(s, "store=memory") {
		t.Errorf("embedded default start-up lines:\n%s", s)
	}
}

// serveLines runs `llmguard serve …` whose admin listener is admin until
// /healthz answers (a failure timeout of 30 s), stops it, and returns all
// it logged.
func serveLines(t *testing.T, bin, admin string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("llmguard exited (%v):\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("llmguard did not start:\n%s", out.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	<-exited
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// A cluster seed given as a URL is logged without its password (trial4:
// cluster_addrs took URLs with credentials, which storeForLog joined as
// written).
func TestStoreForLogRedactsClusterPasswords(t *testing.T) {
	got := storeForLog(config.Store{Backend: "redis_cluster", ClusterAddrs: []string{"rediss://app:s3cret@10.0.0.5:6380", "10.0.0.6:6380"}})
	if want := "redis_cluster rediss://app:xxxxx@10.0.0.5:6380,10.0.0.6:6380"; got != want {
		t.Errorf("storeForLog: %q, want %q", got, want)
	}
}
