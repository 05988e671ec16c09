package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// runServe starts `llmguard serve --config cfg` on a free port and returns
// its base URL once it listens; the process is killed at cleanup.
func runServe(t *testing.T, bin, cfg string) string {
	t.Helper()
	// A free port is found by listening on port 0 and closing it, so
	// another process (a Redis or proxy of a test running beside this one)
	// may take it before llmguard binds it: such a start is tried again on
	// new ports. Any other early exit fails the test with what it said.
	for attempt := 1; ; attempt++ {
		url, said, ok := startServe(t, bin, cfg)
		if ok {
			return url
		}
		if attempt < 3 && strings.Contains(said, "address already in use") {
			t.Logf("start %d: a port was taken meanwhile, trying new ones: %s", attempt, said)
			continue
		}
		t.Fatalf("llmguard exited before listening; it said:\n%s", said)
	}
}

// startServe starts `llmguard serve` on free ports and waits for it to
// listen. It returns the proxy's URL and ok, or, when the process ended
// before listening, ok false and what it wrote to standard error.
func startServe(t *testing.T, bin, cfg string) (url, said string, ok bool) {
	t.Helper()
	listen := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", listen, "--admin-listen", freeAddr(t))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	var early strings.Builder // what it said before listening; read after ready closes
	go func() {
		s := bufio.NewScanner(stderr)
		listening := false
		for s.Scan() {
			if !listening {
				early.WriteString(s.Text())
				early.WriteByte('\n')
			}
			if strings.Contains(s.Text(), "llmguard listening") {
				listening = true
				ready <- true
			}
			if strings.Contains(s.Text(), "level=WARN") || strings.Contains(s.Text(), "level=ERROR") {
				t.Logf("%s: %s", listen, s.Text())
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			return "", early.String(), false
		}
	case <-time.After(startWait):
		t.Fatal("llmguard did not start")
	}
	return "http://" + listen, "", true
}

// Four llmguard processes share one Redis: 32 clients spread over them
// admit no more than one tenant bucket allows (burst + rate × elapsed), and
// deny only when it is empty.
func TestMultiProcessSharedBudget(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	const (
		burst = 40
		rate  = 100 // requests per second
	)
	cfg := filepath.Join(t.TempDir(), "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-a, user: a, tenant: acme}
  - {key: sk-b, user: b, tenant: acme}
limits:
  - {name: tenant-rps, scope: tenant, unit: requests, rate: %d, per: 1s, burst: %d}
# A generous deadline: this test is about sharing one budget, not about a
# slow store, and the machine runs 4 proxies and 32 clients on 2 cores.
# A limit that fails closed can never over-admit, whatever happens.
store: {backend: redis, redis_url: "redis://%s/0", timeout: 1s, nodes: 4, on_failure: closed}
`, mock.URL, rate, burst, srv.Addr())), 0o644)

	bin := binary(t)
	var urls []string
	for range 4 {
		urls = append(urls, runServe(t, bin, cfg))
	}

	const clients = 32
	var admitted, denied, other, needless atomic.Int64
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	begin := time.Now()
	stop := begin.Add(3 * time.Second)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := urls[c%len(urls)] + "/v1/chat/completions"
			key := []string{"sk-a", "sk-b"}[c%2]
			for n := 0; n < 5000 && time.Now().Before(stop); n++ {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := hc.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					admitted.Add(1)
				case 429:
					denied.Add(1)
					// A denial must see no request left in the bucket.
					if rem := resp.Header.Get("x-ratelimit-remaining-requests"); rem != "0" {
						needless.Add(1)
					}
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	allowed := burst + rate*elapsed.Seconds()
	t.Logf("4 processes, %d clients, %v: admitted %d, denied %d, other %d; burst + rate × elapsed = %.0f",
		clients, elapsed.Round(time.Millisecond), admitted.Load(), denied.Load(), other.Load(), allowed)
	if other.Load() != 0 {
		t.Errorf("%d requests failed or got neither 200 nor 429", other.Load())
	}
	if float64(admitted.Load()) > allowed {
		t.Errorf("over-admission: admitted %d > %.0f", admitted.Load(), allowed)
	}
	// No needless denials: every 429 saw the bucket empty. (A floor on what
	// was admitted, as a share of burst + rate × elapsed, would measure this
	// machine's throughput instead, and fail when it is busy.)
	if n := needless.Load(); n > 0 {
		t.Errorf("%d denials while the bucket reported requests left", n)
	}
	if mock.Requests.Load() != admitted.Load() {
		t.Errorf("upstream saw %d requests, %d admitted", mock.Requests.Load(), admitted.Load())
	}
}
