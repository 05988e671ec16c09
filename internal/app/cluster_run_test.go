package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
	h, logs := serveLogged(t, mock, cfg)
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

// TestClusterOutageIsEachMastersOwn: the outage a master's breaker-close
// line gives runs from that master's first failed call, whatever other
// masters' breakers did meanwhile. trial22 killed a master of a cluster
// without replicas; 18 s later every node answered CLUSTERDOWN and the
// other masters' breakers opened too, and the killed master's close line
// said outage=30.667s for 48 s down: one time for the whole store, moved
// by each breaker that opened. Here a first master is frozen, a second
// one later, and the first's outage must cover at least the time from
// its first failed take to its thaw (a same-run lower bound).
func TestClusterOutageIsEachMastersOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, PartialCoverage: true})
	first, second, third := cluster.Nodes[0], cluster.Nodes[1], cluster.Nodes[2]
	tFirst := clusterTenant(t, cluster, first, true)
	tSecond := clusterTenant(t, cluster, second, true)
	tThird := clusterTenant(t, cluster, third, true)
	mock := startMock(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys:
  - {key: sk-first, user: u-first, tenant: %[2]s}
  - {key: sk-second, user: u-second, tenant: %[3]s}
  - {key: sk-third, user: u-third, tenant: %[4]s}
limits:
  - {name: quota, scope: tenant, unit: tokens, quota: 1000000, period: month, on_failure: open}
store:
  backend: redis_cluster
  cluster_addrs: [%[5]s]
  timeout: 300ms
  breaker: {min_calls: 2, open_for: 200ms}
`, mock.URL, tFirst, tSecond, tThird, strings.Join(cluster.Addrs(), ", "))))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := serveLogged(t, mock, cfg)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	post := func(step, key string) {
		t.Helper()
		if resp, b := h.post(key, body); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", step, resp.StatusCode, b)
		}
	}
	// lineOf is the log's last line holding every one of parts, "" if none.
	lineOf := func(parts ...string) string {
		lines := strings.Split(logs.String(), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(lines[i], p)
			}
			if all {
				return lines[i]
			}
		}
		return ""
	}
	opened := func(s *redistest.Server) string { return lineOf("master="+s.Addr(), "to=open") }
	closed := func(s *redistest.Server) string { return lineOf("master="+s.Addr(), "to=closed") }
	for _, key := range []string{"sk-first", "sk-second", "sk-third"} {
		post("step 1 (healthy)", key)
	}

	resumeFirst := first.Pause()
	post("step 2 (first master frozen)", "sk-first")
	failedBy := time.Now() // the first master's first failed call ended before this
	for i := 0; i < 50 && opened(first) == ""; i++ {
		post(fmt.Sprintf("step 2.%d (first master frozen)", i), "sk-first")
	}
	if opened(first) == "" {
		t.Fatalf("step 2: the first master's breaker did not open:\n%s", logs)
	}
	// The fail-open limit's fallback line names the master whose outage it
	// is (trial23: one line per master's breaker, alike).
	if lineOf("now served by this node's fallback bucket", "master="+first.Addr(), "limit=quota") == "" {
		t.Errorf("step 2: no fallback line naming the first master:\n%s", logs)
	}
	// Traffic of a live master, and time: before, a success ended the
	// run, and the second master's breaker opening then reset the outage.
	for i := range 5 {
		post(fmt.Sprintf("step 3.%d (third master live)", i), "sk-third")
		time.Sleep(100 * time.Millisecond)
	}

	secondPaused := time.Now() // before the second master's first failed call began
	resumeSecond := second.Pause()
	defer resumeSecond()
	for i := 0; i < 50 && opened(second) == ""; i++ {
		post(fmt.Sprintf("step 4.%d (second master frozen)", i), "sk-second")
	}
	if opened(second) == "" {
		t.Fatalf("step 4: the second master's breaker did not open:\n%s", logs)
	}

	resumeFirst()
	thawed := time.Now()
	for i := 0; i < 200 && closed(first) == ""; i++ {
		post(fmt.Sprintf("step 5.%d (first master back)", i), "sk-first")
		time.Sleep(20 * time.Millisecond)
	}
	line := closed(first)
	if line == "" {
		t.Fatalf("step 5: the first master's breaker did not close:\n%s", logs)
	}
	outageIn := func(step, line string) time.Duration {
		t.Helper()
		i := strings.Index(line, "outage=")
		if i < 0 {
			t.Fatalf("%s: close line without its outage: %q", step, line)
		}
		d, err := time.ParseDuration(strings.Fields(line[i+len("outage="):])[0])
		if err != nil {
			t.Fatalf("%s: outage in %q: %v", step, line, err)
		}
		return d
	}
	// The line rounds the outage to the millisecond.
	if outage, least := outageIn("step 5", line), thawed.Sub(failedBy)-time.Millisecond; outage < least {
		t.Errorf("step 5: the first master's outage reads %v; it failed from before its first take ended to its thaw, %v later:\n%s", outage, least, logs)
	}

	// The second master's outage starts at its own first failure, not at
	// the first master's, which had failed for a second or more before.
	resumeSecond()
	for i := 0; i < 200 && closed(second) == ""; i++ {
		post(fmt.Sprintf("step 6.%d (second master back)", i), "sk-second")
		time.Sleep(20 * time.Millisecond)
	}
	seen := time.Now() // after the second master's breaker closed
	line = closed(second)
	if line == "" {
		t.Fatalf("step 6: the second master's breaker did not close:\n%s", logs)
	}
	if outage, most := outageIn("step 6", line), seen.Sub(secondPaused)+time.Millisecond; outage > most {
		t.Errorf("step 6: the second master's outage reads %v; it was frozen %v before its close was seen:\n%s", outage, most, logs)
	}
}
