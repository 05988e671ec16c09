package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/meter"
)

// receiver is a real webhook on 127.0.0.1 that answers each POST with the
// next status of its script (200 once the script is used up) and keeps
// every body.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	script []int
	bodies []string
	heads  []http.Header
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{script: script}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.heads = append(r.heads, req.Header.Clone())
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// waitFor polls cond for up to 20 s (a failure timeout, not a bound).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sleeps records the backoff waits instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) Sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return nil
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

var tokyo = mustZone("Asia/Tokyo")

func mustZone(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// level is acme's monthly USD budget of $10 in Tokyo time, used to used µUSD.
func level(used int64) meter.BudgetLevel {
	return meter.BudgetLevel{Limit: "acme-monthly", Scope: "tenant", Subject: "acme", Tenant: "acme", Unit: "micro_usd",
		Key: "q:acme-monthly:t:acme", Used: used, Quota: 10_000_000,
		PeriodStart: time.Date(2026, 11, 1, 0, 0, 0, 0, tokyo), PeriodEnd: time.Date(2026, 12, 1, 0, 0, 0, 0, tokyo)}
}

func newNotifier(t *testing.T, o Options) (*Notifier, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	if o.Now == nil {
		o.Now = func() time.Time { return time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC) }
	}
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, reg
}

func outcome(n *Notifier, o string) float64 { return testutil.ToFloat64(n.outcomes.WithLabelValues(o)) }

// A webhook that fails twice (503, then 500) and then answers 200 gets
// the crossing three times; the worker waits between attempts with
// exponential backoff and jitter (1 s then 2 s steps, each jittered into
// [d/2, d)), and the JSON payload names the tenant, the limit, the
// threshold, the spend and the period in the budget's zone (+09:00).
func TestWebhookRetriesThenDelivers(t *testing.T) {
	rcv := newReceiver(t, 503, 500)
	sl := &sleeps{}
	jit := []float64{0.999, 0}
	n, _ := newNotifier(t, Options{URL: rcv.URL, Thresholds: []float64{0.5, 0.8, 1}, BaseDelay: time.Second, MaxDelay: time.Minute,
		Sleep: sl.Sleep, Jitter: func() float64 { j := jit[0]; jit = append(jit[1:], j); return j },
		Headers: map[string]string{"Authorization": "Bearer hook-secret"}})
	n.Observe(level(4_000_000)) // 40 %: nothing
	n.Observe(level(5_500_000)) // crosses 0.5
	waitFor(t, "a delivery", func() bool { return outcome(n, OutcomeDelivered) == 1 })
	bodies := rcv.got()
	if len(bodies) != 3 {
		t.Fatalf("got %d POSTs, want 3 (two failures, then success): %q", len(bodies), bodies)
	}
	for i := 1; i < 3; i++ {
		if bodies[i] != bodies[0] {
			t.Errorf("retry %d sent a different body:\n%s\n%s", i, bodies[i], bodies[0])
		}
	}
	d := sl.all()
	if len(d) != 2 {
		t.Fatalf("backoff waits %v, want 2", d)
	}
	if !(d[0] >= 500*time.Millisecond && d[0] < time.Second) || !(d[1] >= time.Second && d[1] < 2*time.Second) {
		t.Errorf("backoff waits %v: want one in [0.5s, 1s), then one in [1s, 2s)", d)
	}
	if d[0] == d[1]/2 {
		t.Errorf("backoff waits %v carry no jitter", d)
	}
	if got := rcv.heads[0].Get("Authorization"); got != "Bearer hook-secret" {
		t.Errorf("Authorization %q: configured headers not sent", got)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &p); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": PayloadType, "tenant": "acme", "limit": "acme-monthly", "scope": "tenant", "subject": "acme",
		"unit": "micro_usd", "threshold": 0.5, "spent": 5.5e6, "limit_amount": 1e7, "spent_usd": 5.5, "limit_usd": 10.0,
		"period_start": "2026-11-01T00:00:00+09:00", "period_end": "2026-12-01T00:00:00+09:00", "timezone": "Asia/Tokyo"}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("payload %s = %v, want %v\n%s", k, p[k], v, bodies[0])
		}
	}
}

// Observing the same budget again in the same period sends nothing more;
// a jump over two thresholds sends both; the next period sends again.
func TestWebhookOncePerCrossingAndPeriod(t *testing.T) {
	rcv := newReceiver(t)
	n, _ := newNotifier(t, Options{URL: rcv.URL, Thresholds: []float64{0.5, 0.8, 1}})
	for range 5 {
		n.Observe(level(6_000_000))
	}
	waitFor(t, "0.5", func() bool { return outcome(n, OutcomeDelivered) == 1 })
	n.Observe(level(10_200_000)) // 0.8 and 1.0 at once
	waitFor(t, "0.8 and 1.0", func() bool { return outcome(n, OutcomeDelivered) == 3 })
	next := level(5_000_000)
	next.PeriodStart, next.PeriodEnd = next.PeriodEnd, time.Date(2027, 1, 1, 0, 0, 0, 0, tokyo)
	n.Observe(next)
	waitFor(t, "next period's 0.5", func() bool { return outcome(n, OutcomeDelivered) == 4 })
	var ths []float64
	for _, b := range rcv.got() {
		var p Payload
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatal(err)
		}
		ths = append(ths, p.Threshold)
	}
	if len(ths) != 4 || ths[0] != 0.5 || ths[1] != 0.8 || ths[2] != 1 || ths[3] != 0.5 {
		t.Errorf("thresholds delivered %v, want [0.5 0.8 1 0.5]", ths)
	}
	if d := outcome(n, OutcomeDuplicate); d != 0 {
		t.Errorf("%v duplicates: the node should not queue a crossing twice", d)
	}
}

// The Slack format is one "text" field, with Slack's &, < and > escaped.
func TestWebhookSlackFormat(t *testing.T) {
	rcv := newReceiver(t)
	n, _ := newNotifier(t, Options{URL: rcv.URL, Format: FormatSlack, Thresholds: []float64{0.8}})
	l := level(9_000_000)
	l.Limit, l.Subject = "big<&>spender", "a<b>"
	n.Observe(l)
	waitFor(t, "a delivery", func() bool { return outcome(n, OutcomeDelivered) == 1 })
	var m map[string]string
	if err := json.Unmarshal([]byte(rcv.got()[0]), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m["text"] == "" {
		t.Fatalf("Slack body %v: want only a text field", m)
	}
	text := m["text"]
	for _, want := range []string{"big&lt;&amp;&gt;spender", "a&lt;b&gt;", "tenant acme", "80%", "$9.00 of $10.00", "2026-11-01T00:00:00+09:00"} {
		if !strings.Contains(text, want) {
			t.Errorf("Slack text %q lacks %q", text, want)
		}
	}
	if strings.ContainsAny(strings.NewReplacer("&amp;", "", "&lt;", "", "&gt;", "").Replace(text), "<>&") {
		t.Errorf("Slack text %q has unescaped markup", text)
	}
}

// A 4xx other than 408 and 429 is not retried; a webhook that keeps
// failing is given up after max_attempts; a redirect is not followed.
func TestWebhookGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []int
		posts  int
	}{
		{"bad request", []int{400}, 1},
		{"always 503", []int{503, 503, 503, 503}, 3},
		{"429 then ok", []int{429}, 2},
		{"redirect", []int{302}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.script...)
			sl := &sleeps{}
			n, _ := newNotifier(t, Options{URL: rcv.URL, Thresholds: []float64{0.5}, MaxAttempts: 3, Sleep: sl.Sleep})
			n.Observe(level(6_000_000))
			waitFor(t, "an outcome", func() bool { return outcome(n, OutcomeDelivered)+outcome(n, OutcomeFailed) == 1 })
			if got := len(rcv.got()); got != tc.posts {
				t.Errorf("%d POSTs, want %d", got, tc.posts)
			}
			wantDelivered := tc.name == "429 then ok"
			if (outcome(n, OutcomeDelivered) == 1) != wantDelivered {
				t.Errorf("delivered=%v, want %v", outcome(n, OutcomeDelivered), wantDelivered)
			}
		})
	}
}

// Observe never blocks: with the worker stuck on a webhook that does not
// answer and a queue of 2, further crossings are dropped and counted, and
// a dropped crossing is queued again by a later Observe.
func TestWebhookQueueFullDrops(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts++
		mu.Unlock()
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(rel)
	n, reg := newNotifier(t, Options{URL: srv.URL, Thresholds: []float64{0.5}, Queue: 2, Timeout: time.Minute})
	key := func(i int) meter.BudgetLevel { l := level(6_000_000); l.Key = "k" + string(rune('a'+i)); return l }
	n.Observe(key(0))
	waitFor(t, "the worker to be stuck", func() bool { mu.Lock(); defer mu.Unlock(); return posts == 1 })
	for i := 1; i <= 6; i++ {
		n.Observe(key(i)) // 2 queue, 4 drop
	}
	if d := outcome(n, OutcomeDropped); d != 4 {
		t.Errorf("dropped %v, want 4", d)
	}
	if q, _ := testutil.GatherAndCount(reg, "llmguard_alert_queue_length"); q != 1 {
		t.Errorf("queue gauge not registered")
	}
	rel()
	waitFor(t, "the queued ones", func() bool { return outcome(n, OutcomeDelivered) == 3 })
	n.Observe(key(6)) // dropped before: queued now
	waitFor(t, "the dropped one, again", func() bool { return outcome(n, OutcomeDelivered) == 4 })
}

// Backoff doubles from base up to max, jittered into [d/2, d).
func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n      int
		jitter float64
		want   time.Duration
	}{
		{1, 0, 250 * time.Millisecond},
		{1, 0.5, 375 * time.Millisecond},
		{2, 0, 500 * time.Millisecond},
		{3, 0, time.Second},
		{10, 0, 15 * time.Second}, // capped at 30s
		{100, 0, 15 * time.Second},
		{100, 2, 30 * time.Second},
	} {
		if got := Backoff(500*time.Millisecond, 30*time.Second, tc.n, tc.jitter); got != tc.want {
			t.Errorf("Backoff(n=%d, jitter=%v) = %v, want %v", tc.n, tc.jitter, got, tc.want)
		}
	}
}

// MemoryClaimer claims an id once until its period ends (plus the grace).
func TestMemoryClaimer(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	c := &MemoryClaimer{Now: func() time.Time { return now }}
	end := now.Add(24 * time.Hour)
	for i, want := range []bool{true, false, false} {
		if ok, _ := c.Claim(context.Background(), "x", end); ok != want {
			t.Errorf("claim %d: %v, want %v", i, ok, want)
		}
	}
	now = end.Add(ClaimGrace)
	if ok, _ := c.Claim(context.Background(), "x", end.Add(30*24*time.Hour)); !ok {
		t.Error("an expired claim was not claimable again")
	}
}

// A budget that denies a request (Exhausted) at 99.7 % reaches the 1.0
// threshold, marked exhausted; the lower ones follow spend, and one above
// 1 is not reached.
func TestWebhookExhaustedReachesOne(t *testing.T) {
	rcv := newReceiver(t)
	n, _ := newNotifier(t, Options{URL: rcv.URL, Thresholds: []float64{0.5, 0.998, 1, 1.2}})
	l := level(9_970_000)
	l.Exhausted = true
	n.Observe(l)
	waitFor(t, "two deliveries", func() bool { return outcome(n, OutcomeDelivered) == 2 })
	var got []Payload
	for _, b := range rcv.got() {
		var p Payload
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if len(got) != 2 || got[0].Threshold != 0.5 || got[0].Exhausted || got[1].Threshold != 1 || !got[1].Exhausted || got[1].Spent != 9_970_000 {
		t.Errorf("payloads %+v: want 0.5 (spend) and 1.0 (exhausted, spent 9.97)", got)
	}
}

// An amount under a cent is written to the micro-dollar, not as $0.00.
func TestDollars(t *testing.T) {
	for usd, want := range map[float64]string{0: "$0.00", 0.0042: "$0.004200", 0.01: "$0.01", 12.345: "$12.35", -0.0001: "$-0.000100"} {
		if got := dollars(usd); got != want {
			t.Errorf("dollars(%v) = %s, want %s", usd, got, want)
		}
	}
}

// The Slack text names a tenant's budget's tenant once, a user's budget's
// user and tenant.
func TestSlackTextNamesOnce(t *testing.T) {
	for _, tc := range []struct {
		p    Payload
		want string
	}{
		{Payload{Limit: "b", Scope: "tenant", Subject: "acme", Tenant: "acme"}, "budget b (tenant acme) crossed"},
		{Payload{Limit: "b", Scope: "user", Subject: "al", Tenant: "acme"}, "budget b (user al, tenant acme) crossed"},
	} {
		if got := slackText(tc.p); !strings.Contains(got, tc.want) {
			t.Errorf("%q lacks %q", got, tc.want)
		}
	}
}

// A budget raised live after it ran out is a new budget for alerts: its
// thresholds alert again against the new quota, and it alerts again when
// it runs out again. Under the old quota nothing is sent twice.
func TestWebhookRaisedBudgetAlertsAgain(t *testing.T) {
	rcv := newReceiver(t)
	n, _ := newNotifier(t, Options{URL: rcv.URL, Thresholds: []float64{0.5, 0.8, 1}})
	out := level(6_070_000) // $10 budget denies at 60.7 %: 0.5 and 1.0
	out.Exhausted = true
	n.Observe(out)
	n.Observe(out)
	waitFor(t, "0.5 and 1.0", func() bool { return outcome(n, OutcomeDelivered) == 2 })
	raised := func(used int64, exhausted bool) meter.BudgetLevel {
		l := level(used)
		l.Quota, l.Exhausted = 20_000_000, exhausted
		return l
	}
	n.Observe(raised(6_070_000, false)) // 30 % of $20: nothing
	n.Observe(raised(10_100_000, false))
	waitFor(t, "0.5 of $20", func() bool { return outcome(n, OutcomeDelivered) == 3 })
	n.Observe(raised(16_500_000, false))
	waitFor(t, "0.8 of $20", func() bool { return outcome(n, OutcomeDelivered) == 4 })
	n.Observe(raised(19_900_000, true))
	waitFor(t, "1.0 of $20", func() bool { return outcome(n, OutcomeDelivered) == 5 })
	var got []string
	for _, b := range rcv.got() {
		var p Payload
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%g/%d", p.Threshold, p.Quota))
	}
	want := "[0.5/10000000 1/10000000 0.5/20000000 0.8/20000000 1/20000000]"
	if fmt.Sprint(got) != want {
		t.Errorf("alerts %v, want %s", got, want)
	}
	if d := outcome(n, OutcomeDuplicate); d != 0 {
		t.Errorf("%v duplicates", d)
	}
}

// The payload gives the used fraction to 4 places, as the usage report
// and the log line do (trial12: 0.5133333333333333), from exact Spent and
// Quota.
func TestPayloadUsedFractionRounded(t *testing.T) {
	p := payloadOf(crossing{level: level(5_133_333), threshold: 0.5, at: time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)})
	if p.UsedFraction != 0.5133 || p.Spent != 5_133_333 || p.Quota != 10_000_000 {
		t.Errorf("used_fraction %v, spent %d, quota %d: want 0.5133 of exact 5133333 / 10000000", p.UsedFraction, p.Spent, p.Quota)
	}
}
