package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
)

// TestReloadDuringRequests reloads a config that opens and closes an
// unmetered_paths entry and changes max_retry_wait while requests run
// through the handler (run with -race): every answer is the closed one
// (403) or the open one (forwarded to an upstream that cannot be reached:
// 502), never another, and once the reloads stop the last file's list
// holds.
func TestReloadDuringRequests(t *testing.T) {
	dir := t.TempDir()
	files := []string{"unmetered_paths: [\"/v1/images/*\"]\nmax_retry_wait: 5s\n", "max_retry_wait: 2m\n"}
	for i, extra := range files {
		if err := os.WriteFile(filepath.Join(dir, []string{"a.yaml", "b.yaml"}[i]), []byte(reloadConfig(extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a0, b0 := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	cfg, err := config.Load(a0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(&syncBuffer{}, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	images := func() int { return callImages(a) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code := images(); code != fasthttp.StatusForbidden && code != fasthttp.StatusBadGateway {
					t.Errorf("during reloads: status %d, want 403 or 502", code)
					return
				}
			}
		}()
	}
	for i := range 20 {
		if err := a.Reload([]string{a0, b0}[i%2]); err != nil {
			t.Errorf("reload %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	// The last reload was b.yaml (no unmetered_paths): closed.
	if code := images(); code != fasthttp.StatusForbidden {
		t.Fatalf("after the reloads: status %d, want 403", code)
	}
	if err := a.Reload(a0); err != nil {
		t.Fatal(err)
	}
	if code := images(); code != fasthttp.StatusBadGateway {
		t.Fatalf("after reloading a.yaml: status %d, want 502", code)
	}
}
