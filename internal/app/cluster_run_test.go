package app

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestClusterRunEndsWhenItsMasterAnswers: on a Redis Cluster, a run of
// failed calls on one master is not ended by calls another master serves.
// trial22 killed one master of three under two nodes: its tenant's next
// take failed ("store take failed") and a take of a tenant on a live master
// logged "store answers again after failed calls; limits are taken from it
// again" 5 ms later, while the master was still down. The end is logged
// once the failed master itself answers.
func TestClusterRunEndsWhenItsMasterAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, PartialCoverage: true})
	victim := cluster.Nodes[0]
	tDown := clusterTenant(t, cluster, victim, true)
	tLive := clusterTenant(t, cluster, victim, false)
	mock := startMock(t)
	// min_calls 10000: the breaker never opens, so only the run's own line
	// can say that the store answers again; timeout 300ms: a take on the
	// frozen master fails at it, the live masters' do not on a loaded machine.
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-down, user: u-down, tenant: %[2]s}
  - {key: sk-live, user: u-live, tenant: %[3]s}
limits:
  - {name: down-quota, scope: tenant, unit: tokens, quota: 1000000, period: month, tenants: [%[2]s], on_failure: open}
  - {name: live-quota, scope: tenant, unit: tokens, quota: 1000000, period: month, tenants: [%[3]s], on_failure: open}
store:
  backend: redis_cluster
  cluster_addrs: [%[4]s]
  timeout: 300ms
  breaker: {min_calls: 10000}
`, mock.URL, tDown, tLive, strings.Join(cluster.Addrs(), ", "))))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	post := func(step, key string) {
		t.Helper()
		if resp, b := h.post(key, body); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", step, resp.StatusCode, b)
		}
	}
	post("step 1 (healthy, down's tenant)", "sk-down")
	post("step 1 (healthy, live's tenant)", "sk-live")

	resume := victim.Pause()
	post("step 2 (master frozen: served by the fallback)", "sk-down")
	const failed, back = "store take failed", "store answers again after failed calls"
	if !strings.Contains(logs.String(), failed) {
		t.Fatalf("step 2: the failed take was not logged:\n%s", logs)
	}
	for i := range 5 {
		post(fmt.Sprintf("step 3.%d (a live master's tenant)", i), "sk-live")
	}
	if out := logs.String(); strings.Contains(out, back) {
		t.Fatalf("step 3: the end of the run was logged while its master is still frozen:\n%s", out)
	}

	resume()
	for i := 0; i < 200 && !strings.Contains(logs.String(), back); i++ {
		post(fmt.Sprintf("step 4.%d (master back)", i), "sk-down")
	}
	if out := logs.String(); !strings.Contains(out, back) {
		t.Fatalf("step 4: the master answers again and the run's end was not logged:\n%s", out)
	}
}
