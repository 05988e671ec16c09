package main

import (
	"context"
	"fmt"
	"io"
	"math"
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

// Three llmguard processes share one 3-master Redis Cluster (issue #14,
// "What must be shown": several processes, one cluster). Two tenants, each
// with a limit of burst 60 and 50 requests/s split into 4 shards; acme's
// shards are also leased (size 8, so 2 units a shard). 24 clients overrun
// both; one process is SIGKILLed a third of the way through, its leases
// never returned. Each tenant's 200s must stay within burst + rate ×
// elapsed, to the unit (requests are whole units), the shards must sit on
// more than one master, and the survivors must have served admissions from
// leases.
func TestMultiProcessClusterShardedLeasedBudget(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	// Far below what a loaded 2-core machine serves through three
	// proxies: the clients must reach both limits.
	const (
		burst = 60
		rate  = 50 // requests per second
	)
	addrs := `"` + strings.Join(cluster.Addrs(), `", "`) + `"`
	cfg := filepath.Join(t.TempDir(), "llmguard.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-a, user: a, tenant: acme}
  - {key: sk-b, user: b, tenant: beta}
limits:
  - {name: acme-rps, scope: tenant, tenants: [acme], unit: requests, rate: %d, per: 1s, burst: %d, shards: 4, lease: {size: 8, ttl: 100ms}}
  - {name: beta-rps, scope: tenant, tenants: [beta], unit: requests, rate: %d, per: 1s, burst: %d, shards: 4}
# Fail-closed: a store call that fails is refused, never admitted by the
# fallback, so any excess is the shards' or the leases' doing.
store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 2s, nodes: 3, on_failure: closed}
`, mock.URL, rate, burst, rate, burst, addrs)), 0o644)

	bin := binary(t)
	var proxies, admins []string
	var cmds []*exec.Cmd
	for range 3 {
		p, a, c := serveProcess(t, bin, cfg)
		proxies, admins, cmds = append(proxies, p), append(admins, a), append(cmds, c)
	}

	const clients = 24
	tenants := []string{"acme", "beta"}
	keys := []string{"sk-a", "sk-b"}
	var admitted, denied [2]atomic.Int64
	var other atomic.Int64
	var killed atomic.Bool
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	begin := time.Now()
	stop := begin.Add(3 * time.Second)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			proc, ten := c%len(proxies), (c/len(proxies))%2
			url := proxies[proc] + "/v1/chat/completions"
			for n := 0; n < 5000 && time.Now().Before(stop); n++ {
				if proc == 0 && killed.Load() {
					return // its process is gone
				}
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+keys[ten])
				resp, err := hc.Do(req)
				if err != nil {
					if proc == 0 && killed.Load() {
						return
					}
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					admitted[ten].Add(1)
				case 429:
					denied[ten].Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	killed.Store(true)
	cmds[0].Process.Kill() // SIGKILL: no shutdown, its leases never go back
	wg.Wait()
	elapsed := time.Since(begin)
	// Requests are whole units: what may be admitted is the whole part.
	allowed := int64(math.Floor(burst + rate*elapsed.Seconds()))

	var served, taken float64
	for _, a := range admins[1:] {
		served += metricSum(t, a, "llmguard_lease_served_total")
		taken += metricSum(t, a, "llmguard_lease_taken_total")
	}
	// Where the shards are: each tenant's shard keys, by master.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spread := map[string]int{}
	for _, ten := range tenants {
		masters := map[int]bool{}
		for i, n := range cluster.Nodes {
			ks, err := n.Client().Keys(ctx, "llmguard:{"+ten+":*").Result()
			if err != nil {
				t.Fatalf("keys on node %d: %v", i, err)
			}
			if len(ks) > 0 {
				masters[i] = true
			}
		}
		spread[ten] = len(masters)
	}
	t.Logf("3 processes on a 3-master cluster (one killed after 1s), %d clients, %v: burst + rate × elapsed = %d; "+
		"acme (4 shards, leased) admitted %d, denied %d; beta (4 shards) admitted %d, denied %d; other %d; "+
		"shards on %d and %d masters; the survivors served %.0f admissions from %.0f leases",
		clients, elapsed.Round(time.Millisecond), allowed, admitted[0].Load(), denied[0].Load(),
		admitted[1].Load(), denied[1].Load(), other.Load(), spread["acme"], spread["beta"], served, taken)
	if other.Load() != 0 {
		t.Errorf("%d requests failed or got neither 200 nor 429", other.Load())
	}
	for i, ten := range tenants {
		if admitted[i].Load() > allowed {
			t.Errorf("%s: over-admission: admitted %d > burst + rate × elapsed = %d", ten, admitted[i].Load(), allowed)
		}
		if denied[i].Load() == 0 {
			t.Errorf("%s: no request denied: the clients did not reach the limit, so the bound was not tested", ten)
		}
		if spread[ten] < 2 {
			t.Errorf("%s: its shards' keys are on %d master(s), want at least 2", ten, spread[ten])
		}
	}
	if served == 0 || taken == 0 {
		t.Errorf("the surviving processes served %.0f admissions from %.0f leases: leases unused", served, taken)
	}
}
