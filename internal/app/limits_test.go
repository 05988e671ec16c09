package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/proxy"
)

// limitsTail has a limit of each scope, one only bob's requests take, a
// per-model limit and a tenant budget; refills are too slow to matter.
const limitsTail = `
limits:
  - {name: key-rpd, scope: key, unit: requests, rate: 1000, per: 24h, burst: 1000}
  - {name: user-tpd, scope: user, unit: tokens, rate: 100000, per: 24h, burst: 100000, on_limit: wait, max_wait: 2s}
  - {name: tenant-tpd, scope: tenant, unit: tokens, rate: 1000000, per: 24h, burst: 1000000}
  - {name: global-rpd, scope: global, unit: requests, rate: 100000, per: 24h, burst: 100000}
  - {name: bob-only, scope: user, unit: requests, rate: 10, per: 24h, burst: 10, users: [bob]}
  - {name: model-tpd, scope: key, unit: tokens, rate: 50000, per: 24h, burst: 50000, per_model: true, models: ["gpt-4o*"]}
  - {name: tenant-month, scope: tenant, unit: usd, quota: 100, period: month}
`

// readLimits GETs the caller's limits with key (none when ""), query
// appended; it returns the status and, for a 200, the report.
func readLimits(t *testing.T, h *harness, key, query string) (int, proxy.LimitsReport, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+proxy.LimitsPath+query, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var rep proxy.LimitsReport
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	return resp.StatusCode, rep, string(b)
}

func limitByName(rep proxy.LimitsReport, name string) *proxy.LimitState {
	for i := range rep.Limits {
		if rep.Limits[i].Name == name {
			return &rep.Limits[i]
		}
	}
	return nil
}

// names lists the report's limit and budget names, sorted.
func names(rep proxy.LimitsReport) string {
	var n []string
	for _, l := range rep.Limits {
		n = append(n, l.Name)
	}
	for _, b := range rep.Budgets {
		n = append(n, b.Name)
	}
	slices.Sort(n)
	return strings.Join(n, ",")
}

func TestLimitsReadOutMemory(t *testing.T) { testLimitsReadOut(t, "") }

func TestLimitsReadOutRedis(t *testing.T) {
	srv := redistest.Shared(t)
	// A store timeout far above a call's round trip: a take or a read timed
	// out on a loaded machine falls back to a node-local bucket, and a
	// reconcile timed out never lands; neither is what this test is about.
	testLimitsReadOut(t, fmt.Sprintf("store: {backend: redis, redis_url: \"redis://%s/0\", timeout: 5s}\n", srv.Addr()))
}

func TestLimitsReadOutCluster(t *testing.T) {
	c := redistest.SharedCluster(t, 3)
	// Timeouts far above a call's round trip (see TestLimitsReadOutRedis).
	testLimitsReadOut(t, fmt.Sprintf("store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 5s}\n", strings.Join(c.Addrs(), ", ")))
}

// Each caller reads only the limits that apply to it, without spending;
// after a request, its remaining and its budget's spend move; a wrong key
// is 401.
func testLimitsReadOut(t *testing.T, store string) {
	h := startFrozen(t, limitsTail+store)
	code, alice, body := readLimits(t, h, testKey, "")
	if code != 200 {
		t.Fatalf("alice: %d %s", code, body)
	}
	if got := names(alice); got != "global-rpd,key-rpd,model-tpd,tenant-month,tenant-tpd,user-tpd" {
		t.Fatalf("alice's limits %s", got)
	}
	for _, secret := range []string{"alice", "bob", "acme", "sk-test", "free"} {
		if strings.Contains(body, secret) {
			t.Fatalf("report names %q: %s", secret, body)
		}
	}
	k := limitByName(alice, "key-rpd")
	if k.Remaining == nil || *k.Remaining != 1000 || k.Capacity != 1000 || k.Unit != "requests" || k.Scope != "key" || k.OnLimit != "fail" {
		t.Fatalf("key-rpd %+v", k)
	}
	if u := limitByName(alice, "user-tpd"); u.OnLimit != "wait" || u.MaxWaitMS != 2000 {
		t.Fatalf("user-tpd %+v", u)
	}
	if m := limitByName(alice, "model-tpd"); !m.PerModel || m.Remaining != nil {
		t.Fatalf("per-model limit without a model: %+v, want no status", m)
	}
	b := alice.Budgets[0]
	if b.Unit != "usd" || b.Quota != 100_000_000 || b.Used == nil || *b.Used != 0 || b.Period != "month" || b.ResetsAt != "2027-01-01T00:00:00Z" {
		t.Fatalf("budget %+v", b)
	}
	// Reading spends nothing.
	_, again, _ := readLimits(t, h, testKey, "")
	if *limitByName(again, "key-rpd").Remaining != 1000 || *limitByName(again, "global-rpd").Remaining != 100000 {
		t.Fatalf("a read spent: %s", names(again))
	}
	_, bob, _ := readLimits(t, h, "sk-test-bob", "")
	if got := names(bob); got != "bob-only,global-rpd,key-rpd,model-tpd,tenant-month,tenant-tpd,user-tpd" {
		t.Fatalf("bob's limits %s", got)
	}

	resp, _ := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, "x-mock-completion-tokens", "30")
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	var after proxy.LimitsReport
	until(t, "alice's spend is reconciled", func() bool {
		_, after, _ = readLimits(t, h, testKey, "?model=gpt-4o-mini")
		u := limitByName(after, "user-tpd")
		return u != nil && *u.Remaining > 100000-100 // reconciled: 30 output tokens, not the 100 reserved
	})
	if r := *limitByName(after, "key-rpd").Remaining; r != 999 {
		t.Errorf("key-rpd remaining %d after one request, want 999", r)
	}
	if m := limitByName(after, "model-tpd"); m.Remaining == nil || *m.Remaining >= 50000 || after.Model != "gpt-4o-mini" {
		t.Errorf("per-model limit for gpt-4o-mini: %+v", m)
	}
	if used := *after.Budgets[0].Used; used <= 0 || used > 1000 {
		t.Errorf("budget used %d micro-USD after one small request", used)
	}
	_, bob, _ = readLimits(t, h, "sk-test-bob", "")
	if r := *limitByName(bob, "key-rpd").Remaining; r != 1000 {
		t.Errorf("bob's key-rpd %d: alice's request spent it", r)
	}
	if r := *limitByName(bob, "user-tpd").Remaining; r != 100000 {
		t.Errorf("bob's user-tpd %d: alice's request spent it", r)
	}
	if r := *limitByName(bob, "tenant-tpd").Remaining; r >= 1000000 {
		t.Errorf("bob's tenant-tpd %d: the tenant's bucket is shared, alice's request must show", r)
	}

	for _, key := range []string{"", "sk-wrong"} {
		if code, _, body := readLimits(t, h, key, ""); code != 401 {
			t.Errorf("key %q: %d %s, want 401", key, code, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+proxy.LimitsPath, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+testKey)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 405 {
		t.Errorf("POST: %d, want 405", r.StatusCode)
	}
	if hdr, _ := h.mock.LastRequest(); hdr == nil || string(hdr.RequestURI()) != "/v1/chat/completions" {
		t.Errorf("the upstream's last request is not alice's chat: the read-out must never be forwarded")
	}
}

// The read-out says what kind each limit is: a window counter its
// algorithm and real rate (capacity per window), an in-flight limit no
// period, and a shadow limit that it never denies.
func TestLimitsReadOutKinds(t *testing.T) {
	h := startFrozen(t, `
limits:
  - {name: win, scope: key, unit: requests, rate: 30, per: 1m, algorithm: sliding_window}
  - {name: slots, scope: key, unit: concurrent, max: 3}
  - {name: next, scope: user, unit: tokens, rate: 100, per: 1m, shadow: true}
  - {name: real, scope: user, unit: tokens, rate: 100000, per: 1m}
`)
	code, rep, body := readLimits(t, h, testKey, "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if w := limitByName(rep, "win"); w == nil || w.Algorithm != "sliding_window" || w.Rate != 30 || w.Capacity != 30 || w.PerMS != 60000 || w.Shadow {
		t.Errorf("window limit %+v", w)
	}
	if s := limitByName(rep, "slots"); s == nil || s.Algorithm != "" || s.Capacity != 3 || s.Rate != 0 || s.PerMS != 0 {
		t.Errorf("in-flight limit %+v", s)
	}
	if n := limitByName(rep, "next"); n == nil || !n.Shadow {
		t.Errorf("shadow limit %+v, want shadow: true", n)
	}
	if r := limitByName(rep, "real"); r == nil || r.Shadow || r.Algorithm != "" {
		t.Errorf("token bucket %+v", r)
	}
}

// Every spelling of the read-out's path that an endpoint's would match is
// served by llmguard, never forwarded upstream with the gateway's key.
func TestLimitsReadOutSpellings(t *testing.T) {
	h := startFrozen(t, limitsTail)
	for _, p := range []string{"/v1/llmguard/limits/", "/V1/LLMGUARD/LIMITS", "/v1/llmguard/limits;x", "//v1//llmguard/limits"} {
		req, _ := http.NewRequest(http.MethodGet, h.url+p, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"limits":`) {
			t.Errorf("%s: %d %s; want the caller's report", p, resp.StatusCode, b)
		}
	}
}

// A region's share of a rate keeps its rate whole by a longer period: the
// read-out shows it per the configured period again when that is exact
// (1000 a minute × 0.6: 600 a minute, where it said 3000 per 5 minutes).
func TestLimitsReadOutRegionalRate(t *testing.T) {
	h := startFrozen(t, `
region: eu
limits:
  - {name: split, scope: global, unit: requests, rate: 1000, per: 1m, regions: {eu: 0.6, us: 0.4}}
`)
	code, rep, body := readLimits(t, h, testKey, "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if l := limitByName(rep, "split"); l == nil || l.Rate != 600 || l.PerMS != 60000 || l.Capacity != 600 {
		t.Errorf("eu's share: %+v, want capacity 600 and 600 per 60000 ms", l)
	}
}
