package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second SIGTERM (or Ctrl-C) during the drain exits at once, status 1,
// saying so, though a stream is still in flight; the first one waits for
// it. Before (trial2), every signal after the first was ignored: a drain
// waits for streams up to an upstream's timeout (10 minutes by default),
// and a second Ctrl-C did nothing.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		select { // held in flight until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	cfg := filepath.Join(t.TempDir(), "llmguard.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: up, flavor: openai, base_url: %q, no_key: true}]
keys: [{key: sk-drain, user: u, tenant: t}]
limits: [{name: rpm, scope: user, unit: requests, rate: 100, per: 1m}]
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	cmd := exec.Command(binary(t), "serve", "--config", cfg, "--listen", listen, "--admin-listen", freeAddr(t))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan string, 64)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	waitFor := func(what string) {
		t.Helper()
		guard := time.After(time.Minute) // a hang guard, not a timing assertion
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("llmguard exited before logging %q", what)
				}
				if strings.Contains(l, what) {
					return
				}
			case <-guard:
				t.Fatalf("no %q logged within a minute", what)
			}
		}
	}
	waitFor("llmguard listening")
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
	req.Header.Set("Authorization", "Bearer sk-drain")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line of the stream: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(`msg="shutting down"`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor("second signal while shutting down")
	exited := make(chan error, 1)
	go func() {
		for range lines { // drain stderr so that the process can exit
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitCutShort {
			t.Errorf("after the second SIGTERM: %v, want exit status %d", err, exitCutShort)
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("llmguard still draining a minute after the second SIGTERM")
	}
}
