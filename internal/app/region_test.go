package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/policy"
)

// regionTail is the config tail of a node of region, on its own Redis, with
// peers (the other regions' Redis) for the exchange when exchange is not
// empty (its every:), a global request limit split eu 0.6, us 0.4.
func regionTail(region string, servers map[string]*redistest.Server, limit, exchange string) string {
	tail := fmt.Sprintf("region: %s\nstore: {backend: redis, redis_url: \"redis://%s/0\", timeout: 100ms}\n", region, servers[region].Addr())
	if exchange != "" {
		var peers []string
		for r, s := range servers {
			if r != region {
				peers = append(peers, fmt.Sprintf("%s: \"redis://%s/0\"", r, s.Addr()))
			}
		}
		tail += fmt.Sprintf("region_exchange: {every: %s, min_share: 0.1, peers: {%s}}\n", exchange, strings.Join(peers, ", "))
	}
	return tail + "limits:\n  - " + limit + "\n"
}

// Two regions, each llmguard on its own Redis: a global limit of 10
// requests split 0.6 / 0.4 admits 6 in eu and 4 in us, each region's
// headers say its own share, and each region's bucket lives in its own
// Redis under a key naming it.
func TestAppRegionsSplitAGlobalLimit(t *testing.T) {
	servers := map[string]*redistest.Server{"eu": redistest.Start(t), "us": redistest.Start(t)}
	limit := "{name: org-rpm, scope: global, unit: requests, rate: 1, per: 24h, burst: 10, regions: {eu: 0.6, us: 0.4}}"
	for region, want := range map[string]int{"eu": 6, "us": 4} {
		// A take that outlives the store timeout is served by the
		// fail-open fallback (its own 6), which a loaded machine did once
		// at 100 ms (eu admitted 7): this test is about the split, so its
		// takes get time.
		h := start(t, strings.Replace(regionTail(region, servers, limit, ""), "timeout: 100ms", "timeout: 5s", 1))
		admitted := 0
		for range 8 {
			resp, _ := h.post(testKey, hiBody)
			switch resp.StatusCode {
			case 200:
				admitted++
				if got := resp.Header.Get("x-ratelimit-limit-requests"); got != fmt.Sprint(want) {
					t.Errorf("%s: x-ratelimit-limit-requests %q, want its share %d", region, got, want)
				}
			case 429:
			default:
				t.Fatalf("%s: status %d", region, resp.StatusCode)
			}
		}
		if admitted != want {
			t.Errorf("%s admitted %d of 8, want its share of 10: %d", region, admitted, want)
		}
		key := "llmguard:{global}:org-rpm;region=" + region
		if n, err := servers[region].Client().Exists(context.Background(), key).Result(); err != nil || n != 1 {
			t.Errorf("%s: bucket %q in its Redis: %d, %v", region, key, n, err)
		}
	}
}

// The exchange is wired in: a step advances the plan in the coordinating
// region's Redis and writes every region's record; its metrics are
// exported; a reload that keeps a limit's split keeps its held share, one
// that changes it starts afresh at the floor, and one that changes the
// region is held to the running one. (every: 1h: the loop never steps by
// itself here; the test steps it.)
func TestAppRegionExchangeWiredIn(t *testing.T) {
	servers := map[string]*redistest.Server{"eu": redistest.Start(t), "us": redistest.Start(t)}
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	limit := "{name: org-rps, scope: global, unit: requests, rate: 10, per: 1s, regions: {eu: 0.6, us: 0.4}}"
	write := func(region, limit string) string {
		t.Helper()
		path := filepath.Join(dir, region+".yaml")
		if err := os.WriteFile(path, []byte(baseConfig(t, mock.URL, regionTail(region, servers, limit, "1h"))), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	eu := startFile(t, mock, write("eu", limit), log)
	startFile(t, mock, write("us", limit), log)
	// A first start holds the floor: the log says so, with how long a
	// grown share waits (burst/rate 1 s + 3 × every 1h).
	for _, want := range []string{
		`limit=org-rps region=eu share=0.1 configured_share=0.6 grow_after=3h0m1s`,
		`limit=org-rps region=us share=0.1 configured_share=0.4 grow_after=3h0m1s`,
	} {
		if !strings.Contains(logs.String(), "region exchange: this region holds less than its configured share") || !strings.Contains(logs.String(), want) {
			t.Errorf("start-up log lacks the line of a share held below its configured one: %s\n%s", want, logs.String())
		}
	}
	if err := eu.app.regions.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	rule := func() *policy.Rule {
		for i := range eu.app.policy().Rules() {
			if r := &eu.app.policy().Rules()[i]; r.Name == "org-rps" {
				return r
			}
		}
		t.Fatal("no rule org-rps")
		return nil
	}
	base := "llmguard:{global}:org-rps;x=" + rule().Regional.Fingerprint
	for region, key := range map[string]string{"eu": base + ";plan", "us": base + ";share=us"} {
		if n, err := servers[region].Client().Exists(context.Background(), key, base+";share="+region).Result(); err != nil || n != 2 {
			t.Errorf("%s: %q and its share record: %d of 2 exist (%v)", region, key, n, err)
		}
	}
	m := eu.metrics()
	for _, want := range []string{`llmguard_region_share{limit="org-rps",region="eu"} 0.1`, `llmguard_region_share_floor{limit="org-rps",region="eu"} 0.1`, `llmguard_region_exchange_errors_total{step="exchange"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	rule().Regional.Hold(700_000, time.Now().Add(time.Hour)) // as if read from the record
	// The gauge is the share the node's takes use now, read at the scrape
	// (it was the value of the last read, which a node whose reads fail
	// keeps showing after it has fallen to its floor).
	if m := eu.metrics(); !strings.Contains(m, `llmguard_region_share{limit="org-rps",region="eu"} 0.7`) {
		t.Errorf("with 0.7 held: metrics lack llmguard_region_share{limit=\"org-rps\",region=\"eu\"} 0.7")
	}
	if err := eu.app.Reload(write("eu", limit)); err != nil {
		t.Fatal(err)
	}
	if got := rule().Regional.Share(time.Now()); got != 700_000 {
		t.Errorf("after a reload keeping the split: share %d, want the held 700000", got)
	}
	if err := eu.app.Reload(write("eu", strings.Replace(limit, "eu: 0.6, us: 0.4", "eu: 0.5, us: 0.5", 1))); err != nil {
		t.Fatal(err)
	}
	if got := rule().Regional.Share(time.Now()); got != 100_000 {
		t.Errorf("after a reload changing the split: share %d, want the floor 100000 (a new split starts afresh)", got)
	}
	// A reload naming another region keeps the running one.
	other := strings.Replace(regionTail("us", servers, limit, "1h"), "redis://"+servers["us"].Addr(), "redis://"+servers["eu"].Addr(), 1)
	if err := os.WriteFile(filepath.Join(dir, "eu.yaml"), []byte(baseConfig(t, mock.URL, other)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := eu.app.Reload(filepath.Join(dir, "eu.yaml")); err != nil {
		t.Fatal(err)
	}
	if k := rule().Key(policy.Principal{}); k != "llmguard:{global}:org-rps;region=eu" {
		t.Errorf("after a reload naming region us: key %q, want eu's still", k)
	}
	rule().Regional.Hold(700_000, time.Now().Add(-time.Millisecond)) // a read that has expired
	if m := eu.metrics(); !strings.Contains(m, `llmguard_region_share{limit="org-rps",region="eu"} 0.1`) {
		t.Errorf("with the last read expired: metrics lack llmguard_region_share{limit=\"org-rps\",region=\"eu\"} 0.1 (the floor)")
	}
}

// The exchange steps by itself: with every 200ms, the plan appears in the
// coordinating region's Redis without any call from the test.
func TestAppRegionExchangeStepsByItself(t *testing.T) {
	servers := map[string]*redistest.Server{"eu": redistest.Start(t), "us": redistest.Start(t)}
	limit := "{name: org-rps, scope: global, unit: requests, rate: 10, per: 1s, regions: {eu: 0.6, us: 0.4}}"
	eu := start(t, regionTail("eu", servers, limit, "200ms"))
	start(t, regionTail("us", servers, limit, "200ms"))
	r := &eu.app.policy().Rules()[0]
	key := "llmguard:{global}:org-rps;x=" + r.Regional.Fingerprint + ";plan"
	deadline := time.Now().Add(20 * time.Second) // a liveness wait, not a bound
	for {
		if n, _ := servers["eu"].Client().Exists(context.Background(), key).Result(); n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no plan %q after 20 s of steps every 200 ms", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A split limit is checked at its region's share: a whole limit of 6000
// tokens holds a default gpt-4o request, eu's half of it does not.
func TestCheckSplitLimitAtItsShare(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: free}]
default_max_output_tokens: 4096
models:
  gpt-4o-mini: {default_max_output_tokens: 256}
region: eu
limits:
  - {name: whole, scope: global, unit: tokens, rate: 6000, per: 1h}
  - {name: split, scope: global, unit: tokens, rate: 6000, per: 1h, regions: {eu: 0.5, us: 0.5}}
`, nil)
	if got := found(fs, "limits[0]"); len(got) != 0 {
		t.Errorf("limits[0]: %v, want nothing (6000 tokens hold 4096 of output and a minimal input)", got)
	}
	if got := found(fs, "limits[1]"); len(got) != 1 || !strings.Contains(got[0].Message, "split holds 3000 tokens") {
		t.Errorf("limits[1]: %v, want a warning that eu's share holds 3000 tokens", got)
	}
}
