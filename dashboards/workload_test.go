package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// scrape is one read of llmguard's admin /metrics, taken after a phase of
// the workload.
type scrape struct {
	phase string
	text  []byte
}

// run is what the workload left: the scrapes, in order, and the instance
// label Prometheus would give them.
type run struct {
	scrapes  []scrape
	instance string
	// quota says whether llmguard accepted the workload's calendar quotas
	// (tenant delta); while quotas are not implemented it refuses them and
	// the workload runs without.
	quota bool
}

// workloadConfig is llmguard in front of the mock (OpenAI and Anthropic
// flavors) and a dead upstream, on a Redis store (miniredis) so that the
// store, breaker and reconciliation metrics exist:
//   - alice (tenant acme) sends ordinary traffic of every kind; acme's
//     request rate fails open;
//   - bob (acme) is held to 1000 tokens: his second call is limited and his
//     third can never fit (too_large);
//   - carol (beta) has a fail-closed limit: 503 while the store is down;
//   - dave (delta) spends against calendar quotas (when quotas exist);
//   - acme's requests also take from a leased limit (acme-leased: served
//     from the node's lease, llmguard_lease_*), every request from a global
//     limit split between regions eu (this node) and us (a second Redis)
//     under the region exchange (llmguard_region_*), and bob's repeated
//     denial is answered from the deny cache (llmguard_denials_cached_total;
//     store.deny_cache 10 s so that a loaded machine still repeats it in
//     time).
//
// A small replay queue (4) makes the reconciliations of the outage's 12
// streams overflow.
const workloadConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
  - {name: dead, flavor: openai, base_url: "%[2]s", path_prefix: /dead, timeout: 2s, no_key: true}
keys:
  - {key: sk-alice, user: alice, tenant: acme, plan: free}
  - {key: sk-bob, user: bob, tenant: acme, plan: free}
  - {key: sk-carol, user: carol, tenant: beta}
  - {key: sk-dave, user: dave, tenant: delta}
models:
  gpt-4o-mini: {encoding: o200k_base, input_usd_per_mtok: 0.15, cached_input_usd_per_mtok: 0.075, output_usd_per_mtok: 0.60, default_max_output_tokens: 256}
  gpt-4o: {encoding: o200k_base, input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, default_max_output_tokens: 256}
  claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15, default_max_output_tokens: 100}
limits:
  - {name: bob-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, users: [bob]}
  - {name: acme-rps, scope: tenant, unit: requests, rate: 1000, per: 1s, tenants: [acme], on_failure: open}
  - {name: beta-rps, scope: tenant, unit: requests, rate: 1000, per: 1s, tenants: [beta], on_failure: closed}
  - {name: tenant-usd, scope: tenant, unit: usd, rate: 100, per: 1h}
  - {name: acme-leased, scope: tenant, unit: requests, rate: 100000, per: 1m, tenants: [acme], on_failure: open, lease: {size: 20, ttl: 100ms}}
  - {name: org-tpm, scope: global, unit: tokens, rate: 100000000, per: 1m, on_failure: open, regions: {eu: 0.6, us: 0.4}}
%[4]s
region: eu
region_exchange: {every: 4s, min_share: 0.1, peers: {us: "redis://%[6]s/0"}}
store:
  backend: redis
  redis_url: "redis://%[3]s/0"
  timeout: 3s   # generous: only the outage (a stopped server, refused at once) may fail a call; at load 30 under -race 1 s failed one take (and once 3 s, with CI's hogs and other sessions); region_exchange.every must stay above it
  breaker: {min_calls: 2, open_for: %[5]s}
  replay_queue: 4
  deny_cache: 10s
ledger: {redis_stream: "llmguard:ledger"}   # on the store's Redis: the outage holds its records until it is back
`

// quotaLimits are dave's calendar quotas. He sends one request in each of
// the 4 phases of ordinary traffic, so that by the last his daily quota is
// used up (LLMGuardBudgetExhausted) and his weekly one 80 % used
// (LLMGuardBudget80), and neither before.
const quotaLimits = `
  - {name: delta-daily-requests, scope: tenant, unit: requests, quota: 4, period: day, warn_at: [0.5, 0.75], tenants: [delta]}
  - {name: delta-weekly-requests, scope: tenant, unit: requests, quota: 5, period: week, tenants: [delta]}
  - {name: delta-monthly-usd, scope: tenant, unit: usd, quota: 100, period: month, warn_at: [0.8], tenants: [delta]}`

// workloadOptions adapts the workload to who watches it. The zero value
// is what TestAgainstRunningLlmguard uses: an 8 s breaker and no hooks.
type workloadOptions struct {
	// openFor is store.breaker.open_for; 0 means 8 s (the outage waits
	// up to a region exchange interval, 4 s, for a step to fail while the
	// breaker must stay open). A Prometheus that
	// scrapes on its own schedule needs the breaker to stay open long
	// enough to see it open after the outage phase.
	openFor time.Duration
	// started, when set, is called with llmguard's admin listener
	// ("127.0.0.1:port") once it serves, before the first phase.
	started func(admin string)
	// phaseDone, when set, is called after each phase's scrape with the
	// phase's name and the instant it ended; the workload waits for it.
	phaseDone func(phase string, end time.Time)
}

// runWorkload starts llmguard and runs the workload, scraping /metrics
// after each phase: idle, two of ordinary traffic, a store outage, the
// recovery, and one more of ordinary traffic. Everything listens on
// 127.0.0.1; it takes a few seconds (more with a longer o.openFor).
func runWorkload(t *testing.T, o workloadOptions) *run {
	t.Helper()
	if o.openFor == 0 {
		o.openFor = 8 * time.Second
	}
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there: the upstream is unreachable
	mr := miniredis.RunT(t)
	peer := miniredis.RunT(t) // region us's Redis, for the exchange

	r := &run{quota: true}
	a, err := newApp(fmt.Sprintf(workloadConfig, mock.URL, deadURL, mr.Addr(), quotaLimits, o.openFor, peer.Addr()))
	if err != nil {
		t.Logf("llmguard refused calendar quotas (%v): the workload runs without them", err)
		r.quota = false
		a, err = newApp(fmt.Sprintf(workloadConfig, mock.URL, deadURL, mr.Addr(), "", o.openFor, peer.Addr()))
	}
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ln, adm) }()
	t.Cleanup(func() {
		a.Close()
		<-done
	})
	c := &client{t: t, proxy: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String(),
		http: &http.Client{Timeout: 30 * time.Second}} // against a hang; at load 30 under -race a scrape took over 5 s
	r.instance = adm.Addr().String()
	take := func(phase string) {
		r.scrapes = append(r.scrapes, scrape{phase: phase, text: c.metrics()})
		if o.phaseDone != nil {
			o.phaseDone(phase, time.Now())
		}
	}
	if o.started != nil {
		o.started(r.instance)
	}

	take("idle")
	c.traffic()
	take("traffic 1")
	c.traffic()
	take("traffic 2")
	c.outage(mr)
	take("outage")
	c.recover(mr, o.openFor)
	c.traffic()
	take("recovery")
	c.traffic()
	take("traffic 3")
	return r
}

func newApp(yaml string) (*app.App, error) {
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		return nil, err
	}
	return app.New(cfg, slog.New(slog.DiscardHandler))
}

// client sends the workload's requests.
type client struct {
	t            *testing.T
	proxy, admin string
	http         *http.Client
}

// chat is a chat request body for model with max_tokens n. Its system
// prompt, the same in every request, is long enough for the token-count
// cache to remember (hit-ratio panel).
func chat(model string, n int, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":"hi there"}],"max_tokens":%d,"stream":%t}`,
		model, "You are a terse assistant for the dashboards' workload; answer in one line.", n, stream)
}

// send posts body to path with key and headers (name, value pairs) and
// returns the status once the body has been read whole.
func (c *client) send(key, path, body string, headers ...string) int {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.proxy+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// expect sends a request and fails the test when its status is not want.
func (c *client) expect(want int, what, key, path, body string, headers ...string) {
	c.t.Helper()
	if got := c.send(key, path, body, headers...); got != want {
		c.t.Errorf("workload: %s answered %d, want %d", what, got, want)
	}
	c.drained()
}

// drained waits (a bounded while) until llmguard's reconciliation queue is
// empty, so that ordinary traffic never fills the workload's small replay
// queue however slowly a busy machine runs its worker: only the outage's
// reconciliations are to overflow it.
func (c *client) drained() {
	c.t.Helper()
	for range 1000 {
		if bytes.Contains(c.metrics(), []byte("\nllmguard_reconcile_queue_length 0\n")) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// traffic is one phase of ordinary traffic: allowed calls of both flavors,
// two models, a stream and one using more than it reserved (charged); an upstream error and an unreachable upstream;
// a limited, a too-large, an unauthorized and an invalid request.
func (c *client) traffic() {
	c.t.Helper()
	c.expect(200, "alice gpt-4o-mini", "sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 50, false))
	c.expect(200, "alice gpt-4o (reports 20 output tokens)", "sk-alice", "/v1/chat/completions", chat("gpt-4o", 50, false), "x-mock-completion-tokens", "20")
	c.expect(200, "alice gpt-4o-mini using more than reserved", "sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 10, false), "x-mock-completion-tokens", "30")
	c.expect(200, "alice stream", "sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 30, true))
	c.expect(200, "alice messages", "sk-alice", "/v1/messages",
		`{"model":"claude-sonnet-4-5","max_tokens":40,"messages":[{"role":"user","content":"hello claude"}]}`)
	c.expect(500, "alice upstream 500", "sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 10, false), "x-mock-status", "500")
	c.expect(502, "alice unreachable upstream", "sk-alice", "/dead/v1/chat/completions", chat("gpt-4o-mini", 10, false))
	c.expect(200, "bob 100 tokens", "sk-bob", "/v1/chat/completions", chat("gpt-4o-mini", 100, false), "x-mock-completion-tokens", "100")
	// Of two denials in a row, one is answered from the deny cache: the
	// second when the first went to the store, else the first (a denial
	// an earlier phase left in the cache, whose reuse, counted from that
	// phase, may end between the two on a slow machine).
	cached := c.sum(`llmguard_denials_cached_total{limit="bob-tokens"`)
	c.expect(429, "bob over his remaining tokens", "sk-bob", "/v1/chat/completions", chat("gpt-4o-mini", 900, false))
	c.expect(429, "bob again at once (a cached denial)", "sk-bob", "/v1/chat/completions", chat("gpt-4o-mini", 900, false))
	if now := c.sum(`llmguard_denials_cached_total{limit="bob-tokens"`); now <= cached {
		c.t.Errorf("workload: bob's two denials in a row: llmguard_denials_cached_total{limit=\"bob-tokens\"} went from %v to %v, want more (one answered from the deny cache)", cached, now)
	}
	c.expect(429, "bob above his bucket's capacity", "sk-bob", "/v1/chat/completions", chat("gpt-4o-mini", 5000, false))
	c.expect(200, "carol gpt-4o", "sk-carol", "/v1/chat/completions", chat("gpt-4o", 60, false))
	c.expect(200, "dave gpt-4o-mini", "sk-dave", "/v1/chat/completions", chat("gpt-4o-mini", 20, false))
	c.expect(401, "unknown key", "sk-nobody", "/v1/chat/completions", chat("gpt-4o-mini", 10, false))
	c.expect(400, "duplicate JSON key", "sk-alice", "/v1/chat/completions", `{"model":"gpt-4o-mini","model":"gpt-4o","messages":[]}`)
}

// outage stops Redis under load: streams admitted before it finish during
// it (their reconciliations are held, then dropped past the replay queue),
// acme's requests fail open and carol's fail closed, until the breaker
// opens.
func (c *client) outage(mr *miniredis.Miniredis) {
	c.t.Helper()
	var wg sync.WaitGroup
	const streams = 12
	admitted := make(chan struct{}, streams)
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 5 words of the 50 reserved: reconciliation refunds 45.
			req, _ := http.NewRequest(http.MethodPost, c.proxy+"/v1/chat/completions", strings.NewReader(chat("gpt-4o-mini", 50, true)))
			req.Header.Set("Authorization", "Bearer sk-alice")
			req.Header.Set("x-mock-completion-tokens", "5")
			req.Header.Set("x-mock-delay-ms", "80")
			resp, err := c.http.Do(req)
			admitted <- struct{}{}
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	for range streams {
		<-admitted
	}
	mr.Close()
	deadline := time.Now().Add(20 * time.Second) // a liveness wait, not a bound
	// At least one of each: the streams' failed reconciliations can open
	// the breaker (min_calls 2) before the first check, and a loop that
	// sent nothing then left no fail-closed decision for the alert to see
	// (trial19, at load 27: LLMGuardFailClosedDecisions held at no
	// scrape). An open breaker answers them as a failing store does.
	for first := true; first || c.readiness().Breaker != "open"; first = false {
		if time.Now().After(deadline) {
			c.t.Fatal("workload: the store breaker did not open with Redis down")
		}
		if s := c.send("sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 10, false)); s != 200 {
			c.t.Errorf("workload: fail-open request answered %d during the outage, want 200", s)
		}
		if s := c.send("sk-carol", "/v1/chat/completions", chat("gpt-4o-mini", 10, false)); s != 503 {
			c.t.Errorf("workload: fail-closed request answered %d during the outage, want 503", s)
		}
	}
	wg.Wait()
	// The streams' reconciliations meet the open breaker: the reconciler
	// holds store.replay_queue of them and drops the rest. The breaker
	// stays open (8 s) past the scrape that follows.
	// The region exchange steps every 4 s (each call bounded by 1 s,
	// every/4) on the store's Redis: a step
	// during the outage fails (llmguard_region_exchange_errors_total).
	deadline = time.Now().Add(10 * time.Second) // a liveness wait, not a bound
	for c.regionErrors() == 0 {
		if time.Now().After(deadline) {
			c.t.Fatal("workload: no region exchange step failed during the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Second) // a liveness wait, not a bound
	for c.readiness().ReconcileDropped == 0 {
		if time.Now().After(deadline) {
			c.t.Fatal("workload: no reconciliation was dropped during the outage")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recover restarts Redis and waits for the breaker, open for openFor, to
// close.
func (c *client) recover(mr *miniredis.Miniredis, openFor time.Duration) {
	c.t.Helper()
	if err := mr.Restart(); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(openFor + 15*time.Second) // a failure timeout only
	for c.readiness().Breaker != "closed" {
		if time.Now().After(deadline) {
			c.t.Fatal("workload: the store breaker did not close after Redis returned")
		}
		c.send("sk-alice", "/v1/chat/completions", chat("gpt-4o-mini", 10, false))
		time.Sleep(50 * time.Millisecond)
	}
}

type readiness struct {
	Breaker          string `json:"breaker"`
	ReconcileDropped int64  `json:"reconcile_dropped"`
}

func (c *client) readiness() readiness {
	c.t.Helper()
	var r readiness
	resp, err := c.http.Get(c.admin + "/readyz")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		c.t.Fatalf("/readyz: %v", err)
	}
	return r
}

// regionErrors is the sum of llmguard_region_exchange_errors_total over
// its steps.
func (c *client) regionErrors() float64 {
	c.t.Helper()
	return c.sum("llmguard_region_exchange_errors_total{")
}

// sum is the sum of the scraped samples whose line starts with prefix (a
// metric's name and "{").
func (c *client) sum(prefix string) float64 {
	c.t.Helper()
	var sum float64
	for _, line := range strings.Split(string(c.metrics()), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				c.t.Fatalf("/metrics: %q: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

func (c *client) metrics() []byte {
	c.t.Helper()
	resp, err := c.http.Get(c.admin + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		c.t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return b
}
