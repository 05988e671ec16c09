package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	"github.com/llmguard/llmguard/internal/redistest"
)

// `llmguard keys` manages the key store of a running llmguard (a real
// serve process on a real Redis) through its admin API: create prints the
// secret once and it works; list, show and audit print what the store
// holds; rotate hands out a new secret and retires the old; revoke refuses
// it; every change is recorded with the --actor given.
func TestKeysCommand(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "cli-admin-token")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmguard.yaml")
	admin, listen := freeAddr(t), freeAddr(t)
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
admin_listen: %s
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
store: {backend: redis, redis_url: "redis://%s/0"}
key_store: {enabled: true}
`, listen, admin, mock.URL, srv.Addr())), 0o644)
	bin := binary(t)
	serve := exec.Command(bin, "serve", "--config", cfg)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	waitHealthy(t, admin)

	run := func(stdin string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("llmguard %s: %v\n%s%s", strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	chat := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	out, info := run("", "keys", "create", "--config", cfg, "--tenant", "acme", "--user", "carol", "--plan", "pro",
		"--expires-in", "720h", "--actor", "ops-carol")
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, "sk-lg-") || strings.Contains(out, " ") || !strings.Contains(info, "shown only now") {
		t.Fatalf("create printed %q, %q", out, info)
	}
	if st := chat(secret); st != 200 {
		t.Fatalf("the created key answered %d", st)
	}
	sum := sha256.Sum256([]byte(secret))
	id := hex.EncodeToString(sum[:8])

	out, _ = run("", "keys", "list", "--config", cfg, "--tenant", "acme")
	if !strings.Contains(out, id) || !strings.Contains(out, "carol") || !strings.Contains(out, "active") {
		t.Errorf("list:\n%s", out)
	}
	out, _ = run("", "keys", "show", id, "--config", cfg, "--json")
	var k app.KeyInfo
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.Plan != "pro" || k.CreatedBy != "ops-carol" || k.ExpiresAt.IsZero() {
		t.Errorf("show --json: %s %v", out, err)
	}

	out, _ = run("", "keys", "rotate", id, "--config", cfg, "--admin", admin, "--grace", "0s")
	rotated := strings.TrimSpace(out)
	if !strings.HasPrefix(rotated, "sk-lg-") || rotated == secret {
		t.Fatalf("rotate printed %q", out)
	}
	if st := chat(secret); st != 401 {
		t.Errorf("the rotated-out key answered %d", st)
	}
	if st := chat(rotated); st != 200 {
		t.Errorf("the new key answered %d", st)
	}
	newSum := sha256.Sum256([]byte(rotated))
	newID := hex.EncodeToString(newSum[:8])
	out, _ = run("", "keys", "revoke", newID, "--config", cfg, "--actor", "ops-dan")
	if !strings.Contains(out, "revoked") {
		t.Errorf("revoke printed %q", out)
	}
	if st := chat(rotated); st != 401 {
		t.Errorf("the revoked key answered %d", st)
	}
	out, _ = run("", "keys", "audit", "--config", cfg)
	for _, want := range []string{"ops-carol (token)", "create", "rotate", "ops-dan (token)", "revoke", id} {
		if !strings.Contains(out, want) {
			t.Errorf("audit lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) || strings.Contains(out, rotated) {
		t.Errorf("audit shows a secret:\n%s", out)
	}

	// A key rotated with a grace period, whose successor is then revoked:
	// the old secret stops working with it, not when its grace ends
	// (trial11), and revoke says so.
	out, _ = run("", "keys", "create", "--config", cfg, "--tenant", "acme", "--user", "erin")
	graced := strings.TrimSpace(out)
	gracedSum := sha256.Sum256([]byte(graced))
	gracedID := hex.EncodeToString(gracedSum[:8])
	out, _ = run("", "keys", "rotate", gracedID, "--config", cfg, "--grace", "1h")
	successor := strings.TrimSpace(out)
	if st := chat(graced); st != 200 {
		t.Errorf("the rotated key in its grace period answered %d", st)
	}
	successorSum := sha256.Sum256([]byte(successor))
	successorID := hex.EncodeToString(successorSum[:8])
	// Both keys work now: list tells the old (state grace, replaced by the
	// new) from the new (active, replaces the old), in the table and the
	// JSON (trial26: both read "active").
	out, _ = run("", "keys", "list", "--config", cfg, "--user", "erin")
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if r := rows[gracedID]; len(r) < 4 || r[3] != "grace" || !strings.Contains(strings.Join(r, " "), "replaced by "+successorID) {
		t.Errorf("list: the key in its grace period reads %q, want state grace, replaced by %s:\n%s", r, successorID, out)
	}
	if r := rows[successorID]; len(r) < 4 || r[3] != "active" || !strings.Contains(strings.Join(r, " "), "replaces "+gracedID) {
		t.Errorf("list: the successor reads %q, want state active, replaces %s:\n%s", r, gracedID, out)
	}
	out, _ = run("", "keys", "list", "--config", cfg, "--user", "erin", "--status", "grace", "--json")
	var l app.KeyList
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Keys) != 1 || l.Keys[0].ID != gracedID ||
		l.Keys[0].State != "grace" || l.Keys[0].Status != "active" {
		t.Errorf("list --status grace --json: %s %v, want %s alone, state grace, status active", out, err, gracedID)
	}
	out, _ = run("", "keys", "show", gracedID, "--config", cfg)
	if !strings.Contains(out, "grace: rotated to "+successorID+", works until ") {
		t.Errorf("show of the key in its grace period:\n%s", out)
	}
	out, _ = run("", "keys", "revoke", successorID, "--config", cfg, "--actor", "ops-dan")
	if !strings.Contains(out, "also revoked") || !strings.Contains(out, gracedID) {
		t.Errorf("revoke of a successor printed %q, want it to name %s", out, gracedID)
	}
	if st := chat(graced); st != 401 {
		t.Errorf("the predecessor of a revoked key answered %d, want 401", st)
	}

	// Refusals exit non-zero with the endpoint's message.
	cmd := exec.Command(bin, "keys", "revoke", newID, "--config", cfg)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "already revoked") {
		t.Errorf("second revoke: %v %s", err, msg)
	}
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "wrong")
	msg, err = exec.Command(bin, "keys", "list", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "401") {
		t.Errorf("list with a wrong token: %v %s", err, msg)
	}
}

// `llmguard keys hash` prints the SHA-256 the config file's key_sha256
// wants, from an argument or from stdin, without the white space around
// the key (which the proxy trims from every credential it reads).
func TestKeysHashCommand(t *testing.T) {
	bin := binary(t)
	const want = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // printf %s test | sha256sum
	for _, tc := range []struct {
		args  []string
		stdin string
	}{{[]string{"keys", "hash", "test"}, ""}, {[]string{"keys", "hash"}, "test\n"}, {[]string{"keys", "hash"}, "test"},
		{[]string{"keys", "hash"}, "test \r\n"}, {[]string{"keys", "hash"}, "\ttest\n"}, {[]string{"keys", "hash", " test "}, ""},
		{[]string{"keys", "hash"}, "test\n\n \n"}} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Stdin = strings.NewReader(tc.stdin)
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%v <%q: %q %v", tc.args, tc.stdin, out, err)
		}
	}
	cmd := exec.Command(bin, "keys", "hash")
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("no key: %s", out)
	}
	// Two keys on stdin: refused, no hash of the first alone (trial9).
	cmd = exec.Command(bin, "keys", "hash")
	cmd.Stdin = strings.NewReader("test\nsk-second\n")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err == nil || o.Len() != 0 || !strings.Contains(e.String(), "more than one line") {
		t.Errorf("two keys on stdin: %v, stdout %q, stderr %q; want a refusal naming the second line and no hash", err, o.String(), e.String())
	}
}

// waitHealthy waits for a serve process's admin listener (startWait at most).
func waitHealthy(t *testing.T, admin string) {
	t.Helper()
	deadline := time.Now().Add(startWait)
	for {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("llmguard did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without --config or --admin, every keys command that asks a node refuses
// to run as a missing flag does (exit 2), naming both flags and why there
// is no default as for serve and usage: the embedded default config has no
// key store. It asks no node (nothing listens on the default's admin port
// here, yet the message is not a connection error).
func TestKeysWithoutConfigNamesTheFlags(t *testing.T) {
	bin := binary(t)
	for _, args := range [][]string{
		{"keys", "list"}, {"keys", "show", "5d41402abc4b2a76"}, {"keys", "revoke", "5d41402abc4b2a76"},
		{"keys", "rotate", "5d41402abc4b2a76"}, {"keys", "audit"}, {"keys", "create", "--tenant", "acme"},
	} {
		cmd := exec.Command(bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit status 2", args, err)
		}
		msg := e.String()
		for _, want := range []string{"--config FILE", "--admin host:port", "embedded default config", "no key store"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: stderr %q does not say %q", args, msg, want)
			}
		}
		if o.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", args, o.String())
		}
	}
}

// A bad --actor (a control character, too long, empty or blank: trial12's
// --actor "$USER" with USER unset was recorded as admin-token) is refused by the command
// itself, naming the flag, with exit status 2 and no node asked (nothing
// listens at --admin here): the node's refusal named its header,
// X-Llmguard-Actor, which the caller never wrote (new-user trial).
func TestKeysBadActorNamesTheFlag(t *testing.T) {
	bin := binary(t)
	for _, actor := range []string{"a\tb", strings.Repeat("x", 129), "", "  "} {
		cmd := exec.Command(bin, "keys", "list", "--admin", "127.0.0.1:1", "--actor", actor)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("--actor %q: %v, want exit status 2", actor, err)
		}
		if msg := e.String(); !strings.Contains(msg, "--actor") || strings.Contains(msg, "X-Llmguard-Actor") || strings.Contains(msg, "connection refused") {
			t.Errorf("--actor %q: stderr %q, want the flag named and no node asked", actor, msg)
		}
	}
}
