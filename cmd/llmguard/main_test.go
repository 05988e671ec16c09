package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/internal/redistest"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// testVersion is the version binary links into llmguard (-X main.version),
// which TestVersionCommand reads back.
const testVersion = "v9.8.7-test"

// startWait is how long a test waits for a started llmguard (or its
// listener) before calling it hung: a deadline for a process that never
// comes up, not a measure of speed. trial27 saw 20 s pass at load average
// 15–27 on 2 cores with the race detector's binaries starting three at a
// time; two minutes leaves room for that and still ends a hang.
const startWait = 2 * time.Minute

// binary builds llmguard once per test run, linked with testVersion as the
// version (one build serves every test, TestVersionCommand's too: a second
// link for it alone took 87 s of the package's 383 s at load 18).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "llmguard-bin")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "llmguard")
		if out, err := exec.Command("go", "build", "-buildvcs=auto", "-ldflags", "-X main.version="+testVersion, "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func TestValidateCommand(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(`
upstreams: [{name: openai, flavor: openai, base_url: "https://api.openai.com", no_key: true}]
limits: [{name: rpm, scope: user, unit: requests, rate: 60, per: 1m}]
`), 0o644)
	os.WriteFile(bad, []byte(`
upstreams: [{name: openai, flavor: openai, base_url: "https://api.openai.com", no_key: true}]
limits: [{name: rpm, scope: organisation, unit: requests, rate: 60, per: 1m}]
`), 0o644)

	out, err := exec.Command(bin, "validate", "--config", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Errorf("valid config: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "validate", "--config", bad).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("invalid config: exit %v, want non-zero", err)
	}
	if !strings.Contains(string(out), "limits[0].scope") || !strings.Contains(string(out), "organisation") {
		t.Errorf("message does not name the bad field:\n%s", out)
	}
}

// validate reports what cannot work: an upstream key's variable unset
// fails it (unless --no-env), warnings are printed (and fail it with
// --strict); serve refuses to start on the missing key.
func TestValidateReportsConfigsThatCannotWork(t *testing.T) {
	bin := binary(t)
	cfg := filepath.Join(t.TempDir(), "llmguard.yaml")
	os.WriteFile(cfg, []byte(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: openai, flavor: openai, base_url: "https://api.openai.com", api_key_env: LLMGUARD_TEST_VALIDATE_KEY}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: standard}]
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1000, per: 1h, plans: [standrad]}
`), 0o644)
	run := func(env string, args ...string) (string, int) {
		// A safety net only: a serve that wrongly starts would otherwise
		// run until the test binary's own timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "LLMGUARD_TEST_VALIDATE_KEY="+env)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("", "validate", "--config", cfg)
	if code == 0 || !strings.Contains(out, "upstreams[0].api_key_env: LLMGUARD_TEST_VALIDATE_KEY is not set") {
		t.Errorf("key unset: exit %d\n%s\nwant non-zero naming upstreams[0].api_key_env", code, out)
	}
	out, code = run("", "validate", "--no-env", "--config", cfg)
	if code != 0 || !strings.Contains(out, "OK") {
		t.Errorf("--no-env: exit %d\n%s", code, out)
	}
	out, code = run("sk-up", "validate", "--config", cfg)
	if code != 0 || !strings.Contains(out, "warning: limits[0]: limit user-tokens holds 1000 tokens") ||
		!strings.Contains(out, `warning: limits[0].plans[0]: no key has plan "standrad"`) ||
		!strings.Contains(out, `warning: keys[0].plan: no limit names plan "standard"`) || !strings.Contains(out, "OK, with 3 warnings") {
		t.Errorf("key set: exit %d\n%s\nwant OK with the three warnings", code, out)
	}
	if out, code = run("sk-up", "validate", "--strict", "--config", cfg); code == 0 {
		t.Errorf("--strict with warnings: exit 0\n%s", out)
	}
	if out, code = run("", "serve", "--config", cfg); code == 0 || !strings.Contains(out, "upstreams[0].api_key_env") {
		t.Errorf("serve with the key unset: exit %d\n%s\nwant a refusal naming upstreams[0].api_key_env", code, out)
	}
}

// serve with the embedded default starts offline and answers its admin
// endpoints.
func TestServeEmbeddedDefault(t *testing.T) {
	bin := binary(t)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", freeAddr(t))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	timeout := time.After(startWait)
	for listening := false; !listening; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("llmguard exited before listening")
			}
			listening = strings.Contains(l, "llmguard listening")
		case <-timeout:
			t.Fatal("llmguard did not start")
		}
	}
	admin := cmd.Args[len(cmd.Args)-1]
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": `"store":"memory"`, "/metrics": "llmguard_store_duration_seconds"} {
		resp, err := http.Get("http://" + admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %.200s, want %q", path, resp.StatusCode, b, want)
		}
	}
	// usage without --config reads the embedded default too, as serve
	// does: a newcomer's `llmguard usage` asks the `llmguard serve` they
	// started (here on another admin address, hence --admin).
	out, err := exec.Command(bin, "usage", "--admin", admin, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("usage without --config: %v\n%s", err, out)
	}
	var rep app.UsageReport
	if err := json.Unmarshal(out, &rep); err != nil || rep.Source != "none" {
		t.Errorf("usage without --config printed %s (%v), want the embedded default's report (no ledger)", out, err)
	}
	// SIGTERM: "shutting down", then "shut down" once drained, and exit 0
	// (trial2: the drain's end left no line, so a log could not tell a
	// clean exit from a SIGKILL).
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var saw []string
	for l := range lines {
		for _, m := range []string{`msg="shutting down"`, `msg="shut down"`} {
			if strings.Contains(l, m) {
				saw = append(saw, m)
			}
		}
	}
	if err := cmd.Wait(); err != nil || strings.Join(saw, " ") != `msg="shutting down" msg="shut down"` {
		t.Errorf("after SIGTERM: exit %v, log lines %q, want shutting down then shut down, exit 0", err, saw)
	}
}

// serve on an address already taken exits 1 naming which listener and
// the flag that moves it (new-user trial: the mock's port given as
// --listen said only "address already in use").
func TestServeAddressInUseNamesTheListener(t *testing.T) {
	bin := binary(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct{ flag, other, want string }{
		{"--listen", "--admin-listen", "proxy listener (listen, or serve --listen host:port)"},
		{"--admin-listen", "--listen", "admin listener (admin_listen, or serve --admin-listen host:port)"},
	} {
		out, err := exec.Command(bin, "serve", c.flag, taken.Addr().String(), c.other, freeAddr(t)).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), c.want) ||
			!strings.Contains(string(out), "address already in use") {
			t.Errorf("serve %s on a taken address: %v\n%s\nwant exit 1 naming %q", c.flag, err, out, c.want)
		}
	}
}

// freeAddr returns a loopback address no one listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// validate counts its warnings in English: one warning, not "1 warnings"
// (new-user trial).
func TestWarningsCount(t *testing.T) {
	for n, want := range map[int]string{1: "1 warning", 2: "2 warnings", 12: "12 warnings"} {
		if got := warnings(n); got != want {
			t.Errorf("warnings(%d) = %q, want %q", n, got, want)
		}
	}
}

// The start-up log's timer_slack names the slack in force: the one asked
// for when it took, else the one kept, marked inherited (trial2: it named
// the one asked for under a larger inherited slack, or a failure to set).
func TestTimerSlackForLog(t *testing.T) {
	for _, tc := range []struct {
		asked, inForce time.Duration
		want           string
	}{
		{time.Millisecond, time.Millisecond, "1ms"},
		{time.Millisecond, 5 * time.Millisecond, "5ms (inherited)"},
		{time.Millisecond, 50 * time.Microsecond, "50µs (inherited)"}, // not set: an error was printed
		{0, 50 * time.Microsecond, "50µs (inherited)"},                // LLMGUARD_TIMER_SLACK=off
		{time.Millisecond, 0, "inherited"},                            // not Linux, or unreadable
	} {
		if got := timerSlackForLog(tc.asked, tc.inForce); got != tc.want {
			t.Errorf("timerSlackForLog(%v, %v) = %q, want %q", tc.asked, tc.inForce, got, tc.want)
		}
	}
}

// `llmguard help` prints what --help does, for llmguard or for a command,
// and exits 0; an unknown command exits 2 (trial2: `llmguard help` was
// refused as an unexpected argument, exit 2).
func TestHelpCommand(t *testing.T) {
	bin := binary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Commands:"},
		{[]string{"help", "serve"}, "Usage: llmguard serve [flags]"},
		{[]string{"serve", "--help"}, "LLMGUARD_TIMER_SLACK"}, // the environment, which no flag shows
		{[]string{"help", "keys", "create"}, "Usage: llmguard keys create --tenant=STRING [flags]"},
	} {
		out, err := exec.Command(bin, tc.args...).Output()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("llmguard %v: %v, output %.300q, want %q", tc.args, err, out, tc.want)
		}
	}
	var exit *exec.ExitError
	if err := exec.Command(bin, "help", "bogus").Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("llmguard help bogus: %v, want exit status 2", err)
	}
}

// validate --connect dials what the config names: a Redis that answers and
// an upstream that listens pass; a store or upstream nobody serves fails
// the command, naming the field, without go-redis's dial log.
func TestValidateConnect(t *testing.T) {
	bin := binary(t)
	srv := redistest.Start(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	write := func(redisAddr, upAddr string) string {
		p := filepath.Join(t.TempDir(), "llmguard.yaml")
		os.WriteFile(p, []byte(fmt.Sprintf(`
store: {backend: redis, redis_url: "redis://%s/0"}
upstreams: [{name: openai, flavor: openai, base_url: "http://%s", no_key: true}]
limits: [{name: rpm, scope: user, unit: requests, rate: 60, per: 1m}]
`, redisAddr, upAddr)), 0o644)
		return p
	}
	run := func(cfg string) (string, int) {
		out, err := exec.Command(bin, "validate", "--connect", "--timeout", "5s", "--config", cfg).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run(write(srv.Addr(), up.Addr().String()))
	if code != 0 || !strings.Contains(out, "store.redis_url ("+srv.Addr()+"): Redis ") ||
		!strings.Contains(out, "upstreams[openai] ("+up.Addr().String()+"): TCP") || !strings.Contains(out, ": OK") {
		t.Errorf("reachable: exit %d\n%s", code, out)
	}
	out, code = run(write(goneAddr, goneAddr))
	if code != 1 || !strings.Contains(out, "store.redis_url ("+goneAddr+"): unreachable or unfit") ||
		!strings.Contains(out, "upstreams[openai] ("+goneAddr+"): unreachable or unfit") {
		t.Errorf("nothing listening: exit %d\n%s\nwant 1 naming both", code, out)
	}
	if strings.Contains(out, "pool.go") || strings.Contains(out, ": OK") {
		t.Errorf("nothing listening: go-redis's log or an OK line:\n%s", out)
	}
}
