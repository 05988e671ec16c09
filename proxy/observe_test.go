package proxy

import (
	"io"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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
	if allocs["log"]-allocs["off"] > 8 || allocs["trace"]-allocs["off"] > 60 {
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
