package proxy

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/obs"
)

// observeModes are the proxy-path rigs the observability cost is measured
// on, in one run: both off (the default), the access log on (every line,
// to io.Discard), tracing on (every span, to a discarding exporter), both.
func observeModes(t testing.TB) []struct {
	name string
	with func(*Options)
} {
	log, err := obs.NewAccessLog(obs.AccessLogOptions{Writer: io.Discard, SampleAllowed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := obs.NewTracing(obs.TracingOptions{SampleRatio: 1, Processor: sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())})
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		with func(*Options)
	}{
		{"off", func(*Options) {}},
		{"log", func(o *Options) { o.AccessLog = log }},
		{"trace", func(o *Options) { o.Tracing = tr }},
		{"both", func(o *Options) { o.AccessLog, o.Tracing = log, tr }},
	}
}

// TestObserveOffAllocatesNothing measures, in one run, the allocations of a
// request through the proxy path with the access log and tracing off and
// on. Off, the observation hooks allocate nothing: a request allocates
// exactly what it does with every hook skipped, which the hook-level check
// below pins at zero; on, each adds a bounded number.
func TestObserveOffAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation measurement")
	}
	allocs := map[string]float64{}
	for _, m := range observeModes(t) {
		px := newPathRig(t, cannedJSON, m.with)
		if px.observed() != (m.name != "off") {
			t.Fatalf("%s: observed() = %v", m.name, px.observed())
		}
		r := newPathRequest(pathBody)
		for range 20 { // warm the pools and the keep-alive connection
			if st := r.serve(t, px.Handle); st != 200 {
				t.Fatalf("%s: status %d: %s", m.name, st, r.ctx.Response.Body())
			}
		}
		allocs[m.name] = testing.AllocsPerRun(200, func() { r.serve(t, px.Handle) })
	}
	t.Logf("allocations per request: %v", allocs)
	if !(allocs["off"] < allocs["log"] && allocs["off"] < allocs["trace"] && allocs["log"] < allocs["both"]) {
		t.Errorf("observation on should cost allocations that off does not: %v", allocs)
	}
	// The budget holds without the race detector, which adds allocations
	// of its own (under -race log costs 9 more than off, not 4).
	if !raceEnabled && (allocs["log"]-allocs["off"] > 8 || allocs["trace"]-allocs["off"] > 60) {
		t.Errorf("observation on costs too many allocations per request: %v", allocs)
	}
	// Off, every hook a request passes is a nil check: none allocates.
	x := &exchange{id: "0123456789abcdef"}
	if n := testing.AllocsPerRun(100, func() {
		sp := x.span(spanWeigh)
		sp.End()
		x.endUpstream(200, nil)
		x.settle(meter.Settlement{})
	}); n != 0 {
		t.Errorf("the hooks of an unobserved request allocate %v times", n)
	}
}

// BenchmarkProxyPathObserve is BenchmarkProxyPath with the access log and
// tracing off and on, measured in the same run.
//
//	go test -run XXX -bench ProxyPathObserve -benchmem ./proxy
func BenchmarkProxyPathObserve(b *testing.B) {
	for _, m := range observeModes(b) {
		b.Run(m.name, func(b *testing.B) { run(b, newPathRequest(pathBody), newPathRig(b, cannedJSON, m.with).Handle) })
	}
}

// A request whose handler or stream panics is still logged once, when it
// is settled: the handler's as the 500 internal_error it answered, the
// stream's as counted when it started, with what it was charged.
func TestAccessLogAfterPanics(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	for _, tc := range []struct {
		point, outcome string
		stream         bool
		status         float64
	}{
		{point: pointForward, outcome: "internal_error", status: 500},
		{point: pointStream, outcome: "allowed", stream: true, status: 200},
	} {
		out := &syncWriter{b: &strings.Builder{}}
		log, err := obs.NewAccessLog(obs.AccessLogOptions{Writer: out, SampleAllowed: 1})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, rigOptions{mock: mock, url: mock.URL, w: testWeigher(t), point: tc.point, access: log})
		r.armed.Store(true)
		body := panicBody
		if tc.stream {
			body = panicStreamBody
		}
		r.post(body, "x-mock-completion-tokens", "40", "x-mock-delay-ms", "20")
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.string(), "\n") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // a second line, were there one
		text := out.string()
		if strings.Count(text, "\n") != 1 {
			t.Fatalf("%s: want one line, got:\n%s", tc.point, text)
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(text), &line); err != nil {
			t.Fatal(err)
		}
		if line["outcome"] != tc.outcome || line["status"] != tc.status || line["user"] != "alice" || line["estimated_input_tokens"] == 0.0 {
			t.Errorf("%s: line %s", tc.point, text)
		}
		if tc.stream && line["input_tokens"] == 0.0 {
			t.Errorf("%s: a cut stream's charge is missing: %s", tc.point, text)
		}
	}
}

// string is what was written so far.
func (s *syncWriter) string() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
