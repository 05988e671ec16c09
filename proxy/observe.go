package proxy

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmguard/llmguard/internal/monoclock"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/obs"
)

// Span names of a request's trace: the root, and its children in the order
// a request meets them.
const (
	spanRequest  = "llmguard.request"
	spanWeigh    = "llmguard.weigh"
	spanTake     = "llmguard.take"
	spanUpstream = "llmguard.upstream"
	spanSettle   = "llmguard.settle"
)

// noSpan is the no-op span the span helpers return when a request is not
// traced: calling it costs an interface call and allocates nothing.
var noSpan = trace.SpanFromContext(context.Background())

// reqObs is what one request's access-log line and trace need beyond the
// exchange: its spans, its outcome as counted, and its timings. A request
// has one only when the access log or tracing is on (exchange.obs is nil
// otherwise). Written by the handler's goroutine until a streamed answer
// starts, then by the stream's only.
type reqObs struct {
	begin  time.Time
	tracer trace.Tracer // nil: not traced
	ctx    context.Context
	root   trace.Span
	// upstream is the upstream call's span while it is open, nil before
	// and after.
	upstream trace.Span
	// outcome and limit are what Proxy.count recorded.
	outcome meter.Outcome
	limit   string
	// overhead is llmguard's own time, set when the answer is handed over
	// (for a stream: when its relay starts).
	overhead time.Duration
	// clientGone: the client left mid-stream.
	clientGone bool
	done       bool
}

// observed reports whether requests are logged or traced.
func (p *Proxy) observed() bool { return p.opt.AccessLog != nil || p.opt.Tracing != nil }

// observe starts x's observation: its root span, continuing the caller's
// W3C traceparent when it sent a valid one (its tracestate with it).
func (p *Proxy) observe(ctx *fasthttp.RequestCtx, x *exchange) {
	o := &reqObs{begin: time.Now()}
	x.obs = o
	if t := p.opt.Tracing; t != nil {
		o.tracer = t.Tracer()
		parent := t.Propagator().Extract(context.Background(), requestCarrier{&ctx.Request.Header})
		o.ctx, o.root = o.tracer.Start(parent, spanRequest, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(o.begin),
			trace.WithAttributes(attribute.String("http.request.method", methodName(ctx.Method()))))
	}
}

// methodName is method as the http.request.method attribute holds it: a
// method of RFC 9110 §9 (or PATCH) by its name, anything else "_OTHER" (as
// OpenTelemetry's HTTP semantic conventions ask), so that a caller cannot
// put text of its own in a span through the request line.
func methodName(method []byte) string {
	for _, m := range httpMethods {
		if string(method) == m {
			return m
		}
	}
	return "_OTHER"
}

// httpMethods are the methods methodName names.
var httpMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE"}

// span starts a child span of x's root named name, the no-op span when x
// is not traced.
func (x *exchange) span(name string) trace.Span {
	if x.obs == nil || x.obs.tracer == nil {
		return noSpan
	}
	_, sp := x.obs.tracer.Start(x.obs.ctx, name)
	return sp
}

// startUpstream starts x's upstream span and writes its context into req
// as traceparent and tracestate, in place of the caller's; nothing when x
// is not traced (the caller's headers are then forwarded as they came).
func (p *Proxy) startUpstream(x *exchange, req *fasthttp.Request) {
	if x.obs == nil || x.obs.tracer == nil {
		return
	}
	ctx, sp := x.obs.tracer.Start(x.obs.ctx, spanUpstream, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("llmguard.upstream", x.upstream.Name)))
	x.obs.upstream = sp
	req.Header.Del("traceparent")
	req.Header.Del("tracestate")
	p.opt.Tracing.Propagator().Inject(ctx, requestCarrier{&req.Header})
}

// endUpstream ends x's upstream span, once, with the upstream's status
// (0: none) or the error that ended the call.
func (x *exchange) endUpstream(status int, err error) {
	if x.obs == nil || x.obs.upstream == nil {
		return
	}
	sp := x.obs.upstream
	x.obs.upstream = nil
	if status > 0 {
		sp.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		sp.SetStatus(codes.Error, "upstream call failed")
	} else if status >= 500 {
		sp.SetStatus(codes.Error, "")
	}
	sp.End()
}

// handled ends the observation of a request when its handler returns,
// unless its answer is streamed (the stream ends it).
func (p *Proxy) handled(ctx *fasthttp.RequestCtx, x *exchange) {
	if x.streaming {
		return
	}
	x.obs.overhead = overheadOf(x, monoclock.Now())
	p.settled(x, ctx.Response.StatusCode())
}

// overheadOf is llmguard's own time in x up to now (a monoclock.Now
// reading): since the body was read (or the request arrived, when it never
// was), less the time spent waiting on the upstream and the time held
// waiting for its buckets (on_limit: wait, a hold the operator asked for,
// not llmguard's work).
func overheadOf(x *exchange, now time.Duration) time.Duration {
	start := x.start
	if start == 0 {
		start = monoclock.Of(x.obs.begin)
	}
	return max(now-start-x.upstreamTime-waitedOf(x), 0)
}

// waitedOf is how long x was held waiting for its buckets; zero before
// admission.
func waitedOf(x *exchange) time.Duration {
	if x.m == nil {
		return 0
	}
	return x.m.Waited()
}

// settled writes x's access-log line and ends its trace, once, when the
// request is settled; status is the client's. The entry is the
// settlement's ledger record when there is one (an admitted request),
// completed with what the exchange knows.
func (p *Proxy) settled(x *exchange, status int) {
	o := x.obs
	if o == nil || o.done {
		return
	}
	o.done = true
	now := time.Now()
	var e obs.Entry
	if x.m != nil {
		e.Record, _ = x.m.Record()
	}
	if e.RequestID == "" { // not settled: refused, or never admitted
		e.RequestID, e.KeyID, e.User, e.Tenant = x.id, x.principal.KeyID, x.principal.User, x.principal.Tenant
		e.Model, e.EstimatedInputTokens = x.est.Model, x.est.InputTokens
	}
	e.Flavor = x.flavor().String()
	e.Status = status
	e.Outcome = o.outcome
	if e.Outcome == "" { // not counted by Proxy.count: judged by its status
		e.Outcome = meter.OutcomeOf(status)
	}
	e.Limit = o.limit
	if x.upstream != nil && x.path != "" {
		e.Kind = x.kind.String()
	}
	if len(e.Model) > maxModelName {
		e.Model = e.Model[:maxModelName]
	}
	e.EstimatedOutputTokens = x.est.OutputTokens
	e.Overhead, e.Upstream, e.Wait, e.Duration = o.overhead, x.upstreamTime, waitedOf(x), now.Sub(o.begin)
	e.ClientGone = o.clientGone
	if o.root != nil {
		x.endUpstream(0, nil)
		if sc := o.root.SpanContext(); sc.HasTraceID() {
			e.TraceID = sc.TraceID().String()
		}
		if o.root.IsRecording() {
			var buf [32]attribute.KeyValue
			o.root.SetAttributes(e.SpanAttributes(buf[:0])...)
			o.root.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				o.root.SetStatus(codes.Error, e.Outcome)
			}
		}
		o.root.End(trace.WithTimestamp(now))
	}
	if l := p.opt.AccessLog; l != nil && l.Wants(x.id, e.Outcome) {
		l.Write(&e)
	}
}

// requestCarrier reads and writes W3C trace context in fasthttp request
// headers (propagation.TextMapCarrier).
type requestCarrier struct{ h *fasthttp.RequestHeader }

func (c requestCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c requestCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c requestCarrier) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}

var _ propagation.TextMapCarrier = requestCarrier{}
