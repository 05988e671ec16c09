package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/alert"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/internal/redistest"
)

// hookReceiver is a real webhook on 127.0.0.1 that keeps every body.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// alertCount reads llmguard_alerts_total{outcome} from a node's /metrics.
func alertCount(h *harness, outcome string) int {
	m := regexp.MustCompile(`llmguard_alerts_total\{outcome="` + outcome + `"\} (\d+)`).FindStringSubmatch(h.metrics())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Two llmguard nodes on one real redis-server share a tenant's monthly
// request quota of 10 in Tokyo time with an alert at 50 %. Requests go to
// the nodes in turn, so that both settle requests past the threshold: the
// webhook gets exactly one alert (one node delivers it, the other finds it
// claimed), whose period is the budget's, in +09:00.
func TestBudgetAlertOnceAcrossTwoNodes(t *testing.T) {
	srv := redistest.Shared(t)
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	hook := newHookReceiver(t)
	tail := fmt.Sprintf(`
limits:
  - {name: acme-requests, scope: tenant, unit: requests, quota: 10, period: month, timezone: Asia/Tokyo}
store: {backend: redis, redis_url: "redis://%s"}
alerts:
  webhook: {url: "%s/hook", thresholds: [0.5], timeout: 5s}
`, srv.Addr(), hook.URL)
	var nodes []*harness
	for range 2 {
		cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, tail)))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startParsed(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))))
	}
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	for i := range 8 { // used 8/10: both nodes settle past 5/10
		if resp, b := nodes[i%2].post(testKey, body); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		seen := 0
		for _, h := range nodes {
			seen += alertCount(h, alert.OutcomeDelivered) + alertCount(h, alert.OutcomeDuplicate)
		}
		if seen == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("both nodes did not handle the crossing: %d outcomes; webhook got %q", seen, hook.got())
		}
		time.Sleep(10 * time.Millisecond)
	}
	delivered := alertCount(nodes[0], alert.OutcomeDelivered) + alertCount(nodes[1], alert.OutcomeDelivered)
	got := hook.got()
	if delivered != 1 || len(got) != 1 {
		t.Fatalf("delivered %d, webhook got %d alerts: %q; want exactly one", delivered, len(got), got)
	}
	var p alert.Payload
	if err := json.Unmarshal([]byte(got[0]), &p); err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "acme" || p.Limit != "acme-requests" || p.Threshold != 0.5 || p.Quota != 10 || p.Spent < 5 || p.Unit != "requests" {
		t.Errorf("payload %+v", p)
	}
	if _, off := p.PeriodStart.Zone(); off != 9*3600 || p.PeriodStart.Day() != 1 || p.TimeZone != "Asia/Tokyo" {
		t.Errorf("period start %v (%s): want the 1st, 00:00 +09:00 in Asia/Tokyo", p.PeriodStart, p.TimeZone)
	}
	keys, err := srv.Client().Keys(t.Context(), "llmguard:alert:*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("claim keys %v (%v), want one", keys, err)
	}
	if ttl := srv.Client().TTL(t.Context(), keys[0]).Val(); ttl <= alert.ClaimGrace || ttl > 32*24*time.Hour+alert.ClaimGrace {
		t.Errorf("claim TTL %v: want until the period's end plus the grace", ttl)
	}
}

// On the memory store, a token quota that denies a request (its
// reservation does not fit) alerts at 1.0 once, marked exhausted, with
// the spend so far; the Slack format carries it as text.
func TestBudgetAlertOnDenialMemoryStore(t *testing.T) {
	hook := newHookReceiver(t)
	h := start(t, fmt.Sprintf(`
limits:
  - {name: alice-tokens, scope: user, unit: tokens, quota: 100, period: day, timezone: Asia/Tokyo}
alerts:
  webhook: {url: "%s", format: slack, thresholds: [1.0]}
`, hook.URL))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`
	codes := []int{}
	for range 4 {
		resp, _ := h.post(testKey, body)
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 || codes[3] != 429 {
		t.Fatalf("statuses %v, want 200 200 429 429", codes)
	}
	deadline := time.Now().Add(20 * time.Second)
	for alertCount(h, alert.OutcomeDelivered) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no alert delivered; webhook got %q", hook.got())
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := hook.got()
	if len(got) != 1 {
		t.Fatalf("webhook got %d alerts: %q, want one", len(got), got)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(got[0]), &m); err != nil || len(m) != 1 {
		t.Fatalf("Slack body %s: %v", got[0], err)
	}
	if strings.Contains(m["text"], "crossed 100%") {
		t.Errorf("text %q says spend crossed 100%% at 48 %%", m["text"])
	}
	for _, want := range []string{"alice-tokens", "user alice", "tenant acme", "now denies requests", "48 of 100 tokens", "+09:00"} {
		if !strings.Contains(m["text"], want) {
			t.Errorf("text %q lacks %q", m["text"], want)
		}
	}
}
