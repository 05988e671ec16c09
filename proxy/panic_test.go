package proxy

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/obs"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// panicRig is a Proxy on a real loopback socket in front of the mock
// upstream, on a memory store whose clock never moves (no refill), with a
// fault hook that panics at one injection point.
type panicRig struct {
	t      *testing.T
	url    string
	mock   *mockllm.Server
	store  *bucket.Memory
	pol    *policy.Policy
	w      *weigher.Weigher
	reg    *prometheus.Registry
	ledger *countingLedger
	log    *strings.Builder
	armed  atomic.Bool // the hook panics while armed
	passes atomic.Int64
	point  string
	m      *meter.Metrics
	px     *Proxy
}

// countingLedger counts the records written.
type countingLedger struct {
	mu      sync.Mutex
	records []ledger.Record
}

func (l *countingLedger) Write(r ledger.Record) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return true
}

func (l *countingLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.records)
}

// syncWriter is a strings.Builder safe for the logger's concurrent writes.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

const panicCapacity = 100000

func newPanicRig(t *testing.T, mock *mockllm.Server, w *weigher.Weigher, point string) *panicRig {
	t.Helper()
	return newRig(t, rigOptions{mock: mock, url: mock.URL, w: w, point: point})
}

// rigOptions configures newRig.
type rigOptions struct {
	mock   *mockllm.Server // may be nil
	url    string          // the upstream's base URL
	w      *weigher.Weigher
	point  string // the injection point that panics while armed
	flavor Flavor
	apiKey string // the upstream key llmguard sends
	// maxBody is the proxy's MaxBodyBytes; zero: the default.
	maxBody int
	// limits are more limits: entries of the limits: list; timeout the
	// upstream's timeout, zero: 10s.
	limits  string
	timeout time.Duration
	// access is the proxy's access log; nil: none.
	access *obs.AccessLog
	// maxResponse is the proxy's MaxResponseBytes; zero: the default.
	maxResponse int
	// answerBudget is the proxy's ResponseBudget; zero: the default.
	answerBudget int64
	// readBuffer is the server's ReadBufferSize, which bounds a request's
	// header, bytes; zero: fasthttp's default (4096; the app sets ReadBufferSize).
	readBuffer int
	// endGrace is the proxy's StreamEndGrace; zero: the default.
	endGrace time.Duration
	// burst is the user-tokens limit's burst, in tokens; zero: 100,000.
	burst int
	// tls is the upstream's TLS configuration (an https url); nil: the
	// system's.
	tls *tls.Config
}

func newRig(t *testing.T, o rigOptions) *panicRig {
	t.Helper()
	mock, w, point := o.mock, o.w, o.point
	cfg, err := config.Parse([]byte(`
upstreams:
  - {name: mock, flavor: ` + o.flavor.String() + `, base_url: ` + o.url + `}
keys:
  - {key: sk-panic, user: alice, tenant: acme}
identity: {pass_through: true}
models:
  gpt-4o-mini: {encoding: o200k_base, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, default_max_output_tokens: 256}
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: ` + itoa(cmp.Or(o.burst, 100000)) + `}
` + o.limits))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	store := bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return frozen }, SweepEvery: -1})
	reg := prometheus.NewRegistry()
	m, err := meter.NewMetrics(reg, meter.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.timeout == 0 {
		o.timeout = 10 * time.Second
	}
	r := &panicRig{t: t, mock: mock, store: store, pol: pol, w: w, reg: reg, ledger: &countingLedger{}, log: &strings.Builder{}, point: point, m: m}
	px, err := New(Options{
		Upstreams: []*Upstream{{Name: "mock", Flavor: o.flavor, BaseURL: o.url, APIKey: o.apiKey, Timeout: o.timeout, tlsConfig: o.tls}},
		Policy:    pol, Store: store, Weigher: w, Metrics: m, Ledger: r.ledger, MaxBodyBytes: o.maxBody, MaxResponseBytes: o.maxResponse, AccessLog: o.access,
		ResponseBudget: o.answerBudget, StreamEndGrace: o.endGrace,
		Logger: slog.New(slog.NewTextHandler(&syncWriter{b: r.log}, nil)),
		Now:    func() time.Time { return frozen },
		inject: func(at string) {
			// A stream panics at its third read, once bytes have reached
			// the client; the other points at their first pass.
			if at == r.point && r.armed.Load() && (at != pointStream && at != pointTap || r.passes.Add(1) == 3) {
				panic("injected: secret prompt text that must not be logged")
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.px = px
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: px.Handle, ErrorHandler: px.ErrorHandler, Logger: quietLogger{}, ReadBufferSize: o.readBuffer}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	r.url = "http://" + ln.Addr().String()
	return r
}

// remaining is the user bucket's level, read with a take of cost 0.
func (r *panicRig) remaining() int64 {
	r.t.Helper()
	pr, ok := r.pol.Identify("sk-panic")
	if !ok {
		r.t.Fatal("test key unknown")
	}
	rules := r.pol.Match(nil, pr, "gpt-4o-mini", "/v1/chat/completions")
	if len(rules) != 1 {
		r.t.Fatalf("%d rules match", len(rules))
	}
	d, err := r.store.Take(context.Background(), newRequestID(), []bucket.Item{{Key: rules[0].Key(pr), Limit: rules[0].LimitAt(time.Now()), Cost: 0}})
	if err != nil {
		r.t.Fatal(err)
	}
	return d.Buckets[0].Remaining
}

// post sends a chat request; stream asks for SSE. It returns the status,
// the body the client read, and the error that ended the read, if any.
func (r *panicRig) post(body string, headers ...string) (int, string, error) {
	r.t.Helper()
	status, _, b, err := r.do("/v1/chat/completions", body, headers...)
	return status, b, err
}

// do sends a POST to path with the rig's key unless headers set
// Authorization; it returns the status, headers and body the client read.
func (r *panicRig) do(path, body string, headers ...string) (int, http.Header, string, error) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-panic")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	// The client waits longer than any upstream timeout the rigs set (10 s
	// by default), so that on a loaded machine it is llmguard that ends a
	// call, never the test's own client.
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, "", err // the connection was cut before the answer's headers
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(bufio.NewReader(resp.Body))
	return resp.StatusCode, resp.Header, string(b), rerr
}

func (r *panicRig) panics(stage string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "llmguard_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == stage {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	r.t.Fatalf("llmguard_panics_total has no series for stage %q", stage)
	return 0
}

const panicBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":50}`
const panicStreamBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":50,"stream":true}`

// TestPanicsAreContained injects a panic at each stage of a request's life
// and checks what the caller got, what reached the upstream, what the
// bucket was charged (settled exactly once), the ledger, the panics
// counter, the log (a stack, no request data) and that the proxy still
// serves.
func TestPanicsAreContained(t *testing.T) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	est := w.Chat([]byte(panicBody))
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	const completion = 7 // x-mock-completion-tokens: the output the mock reports
	for _, tc := range []struct {
		name, point, stage string
		stream             bool
		wantStatus         int
		wantUpstream       int64
		// wantCharged is what the bucket keeps after settlement; -2: the
		// mock's reported usage, checked by bounds instead.
		wantCharged int64
		wantLedger  int
	}{
		{name: "handler before weighing", point: pointHandler, stage: meter.StageHandler, wantStatus: 500,
			wantUpstream: 0, wantCharged: 0, wantLedger: 0},
		{name: "handler after the take", point: pointForward, stage: meter.StageHandler, wantStatus: 500,
			wantUpstream: 0, wantCharged: 0, wantLedger: 0},
		{name: "stream relay", point: pointStream, stage: meter.StageStream, stream: true, wantStatus: 200,
			wantUpstream: 1, wantCharged: est.InputTokens + est.OutputTokens, wantLedger: 1}, // cut before its usage: the reservation, as a client gone
		{name: "usage tap", point: pointTap, stage: meter.StageStream, stream: true, wantStatus: 200,
			wantUpstream: 1, wantCharged: est.InputTokens + est.OutputTokens, wantLedger: 1}, // cut before its usage: the reservation, as a client gone
		{name: "settlement store call", point: pointSettle, stage: meter.StageSettle, wantStatus: 200,
			wantUpstream: 1, wantCharged: est.InputTokens + est.OutputTokens, wantLedger: 1}, // the reservation stands
		{name: "ledger", point: pointLedger, stage: meter.StageLedger, wantStatus: 200,
			wantUpstream: 1, wantCharged: -2, wantLedger: 0},
		{name: "metrics", point: pointMetrics, stage: meter.StageMetrics, wantStatus: 200,
			wantUpstream: 1, wantCharged: -2, wantLedger: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPanicRig(t, mock, w, tc.point)
			upstreamBefore := mock.Requests.Load()
			body := panicBody
			if tc.stream {
				body = panicStreamBody
			}
			r.armed.Store(true)
			status, got, readErr := r.post(body, "x-mock-completion-tokens", "7", "x-mock-delay-ms", "50")
			r.armed.Store(false)

			cutEarly := tc.stream && status == 0 && readErr != nil // cut before the headers left: also a cut
			if status != tc.wantStatus && !cutEarly {
				t.Fatalf("status %d, want %d; body %s", status, tc.wantStatus, got)
			}
			if tc.wantStatus == 500 && !strings.Contains(got, `"code":"internal_error"`) {
				t.Errorf("500 body not in OpenAI's shape with code internal_error: %s", got)
			}
			if tc.stream && !cutEarly {
				if readErr == nil {
					t.Errorf("the stream ended cleanly after a panic (read %q); want a cut", got)
				}
				if strings.Contains(got, "[DONE]") || !strings.Contains(got, "data:") {
					t.Errorf("want the stream's first events and no [DONE] after a panic at its third read, got %q", got)
				}
			}
			if n := r.mock.Requests.Load() - upstreamBefore; n != tc.wantUpstream {
				t.Errorf("upstream got %d requests, want %d", n, tc.wantUpstream)
			}
			if tc.wantLedger > 0 {
				r.waitLedger(tc.wantLedger) // a stream settles after its last byte left
			}
			charged := panicCapacity - r.remaining()
			switch tc.wantCharged {
			case -2: // reconciled to the mock's reported usage
				if charged >= est.InputTokens+est.OutputTokens || charged <= completion {
					t.Errorf("charged %d: not reconciled to the reported usage (reservation %d)", charged, est.InputTokens+est.OutputTokens)
				}
			default:
				if charged != tc.wantCharged {
					t.Errorf("charged %d, want %d", charged, tc.wantCharged)
				}
			}
			if n := r.ledger.count(); n != tc.wantLedger {
				t.Errorf("%d ledger records, want %d", n, tc.wantLedger)
			}
			if n := r.panics(tc.stage); n != 1 {
				t.Errorf("panics_total{stage=%q} = %v, want 1", tc.stage, n)
			}
			log := r.log.String()
			if !strings.Contains(log, "panic recovered") || !strings.Contains(log, "goroutine") {
				t.Errorf("log lacks the recovery and its stack:\n%s", log)
			}
			if strings.Contains(log, "secret prompt text") || strings.Contains(log, "hello there") {
				t.Errorf("log holds request data:\n%s", log)
			}

			// Still serving, and the next request is settled normally.
			before := r.remaining()
			status, got, _ = r.post(panicBody, "x-mock-completion-tokens", "7")
			if status != 200 {
				t.Fatalf("after the panic: status %d, body %s", status, got)
			}
			if spent := before - r.remaining(); spent <= completion || spent >= est.InputTokens+est.OutputTokens {
				t.Errorf("after the panic a request was charged %d, want its reported usage", spent)
			}
		})
	}
}

// quietLogger drops fasthttp's own messages (the cut connections the test
// causes on purpose).
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// newRequestID returns 16 random hex digits, as exchange.setID writes them.
func newRequestID() string {
	x := &exchange{}
	x.setID()
	return x.id
}
