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

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// serveProcess starts `llmguard serve --config cfg` on free ports and
// returns its proxy and admin base URLs once it listens, and the process
// (killed at cleanup, if the test has not).
func serveProcess(t *testing.T, bin, cfg string) (proxy, admin string, cmd *exec.Cmd) {
	t.Helper()
	listen, adminListen := freeAddr(t), freeAddr(t)
	cmd = exec.Command(bin, "serve", "--config", cfg, "--listen", listen, "--admin-listen", adminListen)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			if strings.Contains(s.Text(), "llmguard listening") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("llmguard exited before listening")
		}
	case <-time.After(startWait):
		t.Fatal("llmguard did not start")
	}
	return "http://" + listen, "http://" + adminListen, cmd
}

// metricSum sums the samples of a counter or gauge family in an admin's
// /metrics.
func metricSum(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// Three llmguard processes share one Redis through a leased tenant limit:
// 24 clients spread over them admit no more than the bucket allows (burst
// + rate × elapsed), including after one process is killed (SIGKILL, its
// leases never returned) a third of the way through.
func TestMultiProcessLeasedBudget(t *testing.T) {
	srv := redistest.Start(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	// Far below what even a loaded machine serves (about 350 requests/s
	// with both cores busy and -race): the clients must reach the limit
	// for the bound to be tested, whatever the machine's speed.
	const (
		burst = 60
		rate  = 50 // requests per second
	)
	cfg := filepath.Join(t.TempDir(), "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-a, user: a, tenant: acme}
  - {key: sk-b, user: b, tenant: acme}
limits:
  - {name: tenant-rps, scope: tenant, unit: requests, rate: %d, per: 1s, burst: %d, lease: {size: 10, ttl: 100ms}}
# A generous deadline, and fail-closed: the test is about leases sharing one
# budget, not about a slow store (the machine runs 3 proxies and 24 clients).
store: {backend: redis, redis_url: "redis://%s/0", timeout: 1s, nodes: 3, on_failure: closed}
`, mock.URL, rate, burst, srv.Addr())), 0o644)

	bin := binary(t)
	var proxies, admins []string
	var cmds []*exec.Cmd
	for range 3 {
		p, a, c := serveProcess(t, bin, cfg)
		proxies, admins, cmds = append(proxies, p), append(admins, a), append(cmds, c)
	}

	const clients = 24
	var admitted, denied, other, killedErrs atomic.Int64
	var killed atomic.Bool
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	begin := time.Now()
	stop := begin.Add(3 * time.Second)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc := c % len(proxies)
			url := proxies[proc] + "/v1/chat/completions"
			key := []string{"sk-a", "sk-b"}[c%2]
			for n := 0; n < 5000 && time.Now().Before(stop); n++ {
				if proc == 0 && killed.Load() {
					return // its process is gone
				}
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := hc.Do(req)
				if err != nil {
					if proc == 0 && killed.Load() {
						killedErrs.Add(1)
						return
					}
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
				default:
					other.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	killed.Store(true)
	cmds[0].Process.Kill() // SIGKILL: no shutdown, its leases are never returned
	wg.Wait()
	elapsed := time.Since(begin)
	allowed := burst + rate*elapsed.Seconds()
	var served, taken float64
	for _, a := range admins[1:] {
		served += metricSum(t, a, "llmguard_lease_served_total")
		taken += metricSum(t, a, "llmguard_lease_taken_total")
	}
	t.Logf("3 processes (one killed after 1s), %d clients, %v: admitted %d, denied %d, other %d; burst + rate × elapsed = %.0f; the survivors served %.0f admissions from %.0f leases",
		clients, elapsed.Round(time.Millisecond), admitted.Load(), denied.Load(), other.Load(), allowed, served, taken)
	if other.Load() != 0 {
		t.Errorf("%d requests failed or got neither 200 nor 429", other.Load())
	}
	if float64(admitted.Load()) > allowed {
		t.Errorf("over-admission: admitted %d > %.0f", admitted.Load(), allowed)
	}
	if served == 0 || taken == 0 {
		t.Errorf("the surviving processes served %.0f admissions from %.0f leases: leases unused", served, taken)
	}
	if denied.Load() == 0 {
		t.Errorf("no request denied: the clients did not reach the limit, so the bound was not tested")
	}
}
