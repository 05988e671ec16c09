package app

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// Reloads that remove a key and rename a limit race requests of both keys
// (run with -race). Each request is served under one whole config, never
// half of each: the kept key's answers name the old limit or the new one,
// never both or neither; the removed key is served (200, naming the old
// limit only) or refused (401), never served under the new limits, which
// do not know it. Once the last reload has returned, the removed key is
// refused at once and the kept one is under the new limit. (Seen live in
// adv17 with the file watch: 2 workers of a removed key, 6 of a kept one,
// the acme limit cut from 20 to 5: no answer mixed the two.)
func TestReloadRemovingAKeyRacesRequests(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	oldPath, newPath := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	write := func(path, keys, limit string) {
		t.Helper()
		yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: %q, no_key: true}]
keys:
  - {key: sk-kept, user: kept, tenant: acme}
%slimits:
  - {name: %s, scope: user, unit: requests, rate: 1000000, per: 1m}
`, mock.URL, keys, limit)
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(oldPath, "  - {key: sk-gone, user: gone, tenant: acme}\n", "old-rpm")
	write(newPath, "", "new-rpm")
	h := startFile(t, mock, oldPath, slog.New(slog.NewTextHandler(io.Discard, nil)))

	call := func(key string) (status int, policy string) {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("RateLimit-Policy")
	}
	check := func(key string, status int, policy string) {
		oldL, newL := strings.Contains(policy, `"old-rpm"`), strings.Contains(policy, `"new-rpm"`)
		switch {
		case key == "sk-kept" && status == 200 && oldL != newL:
		case key == "sk-gone" && status == 200 && oldL && !newL:
		case key == "sk-gone" && status == 401:
		default:
			t.Errorf("%s: %d with RateLimit-Policy %q: served under neither whole config", key, status, policy)
		}
	}

	var wg sync.WaitGroup
	var stop atomic.Bool
	var served [2]atomic.Int64
	for i := range 4 {
		key := []string{"sk-kept", "sk-gone"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 5000 && !stop.Load(); n++ {
				st, pol := call(key)
				check(key, st, pol)
				if st == 200 {
					served[i%2].Add(1)
				}
			}
		}()
	}
	for i := range 21 { // ends on the new file
		if err := h.app.Reload([]string{newPath, oldPath}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("during 21 reloads: %d kept-key and %d removed-key requests served", served[0].Load(), served[1].Load())
	if served[0].Load() == 0 || served[1].Load() == 0 {
		t.Errorf("served %d kept and %d removed-key requests during the reloads: the race tests nothing", served[0].Load(), served[1].Load())
	}
	if st, _ := call("sk-gone"); st != 401 {
		t.Errorf("the removed key after the reload: %d, want 401", st)
	}
	if st, pol := call("sk-kept"); st != 200 || !strings.Contains(pol, `"new-rpm"`) || strings.Contains(pol, `"old-rpm"`) {
		t.Errorf("the kept key after the reload: %d %q, want 200 under new-rpm only", st, pol)
	}
}
