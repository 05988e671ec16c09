package proxy

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/valyala/fasthttp"
)

// Stages of a request's life at which a panic is recovered, the values of
// llmguard_panics_total's stage label. A panic in one stage never takes the
// process down: the request is answered (or its stream ended), its
// reservation settled once, and the panic counted and logged with its stack.
const (
	// StageHandler is the request handler: identify, weigh, take, forward,
	// and reading a buffered answer.
	StageHandler = "handler"
	// StageStream is the relay of a streamed answer and its usage tap, on
	// fasthttp's writer goroutine.
	StageStream = "stream"
	// StageWatch is the goroutine that notices a streaming client leave.
	StageWatch = "watch"
	// StageSettle is the reconciliation of a finished request's buckets.
	StageSettle = "settle"
	// StageLedger is the writing of a request's ledger record.
	StageLedger = "ledger"
	// StageMetrics is the recording of a finished request's metrics.
	StageMetrics = "metrics"
)

// stages are every Stage*, so that the panics counter has a series for each
// from the start.
var stages = []string{StageHandler, StageStream, StageWatch, StageSettle, StageLedger, StageMetrics}

// Injection points of Options' test hook, inside the stages above: the hook
// runs at each, and a hook that panics is recovered like any other panic.
const (
	pointHandler = "handler" // after identification, before weighing
	pointForward = "forward" // after the take, just before the upstream call
	pointStream  = "stream"  // each read of a streamed answer
	pointTap     = "tap"     // each usage-tap feed of a streamed answer
	pointSettle  = "settle"  // before the reconciliation store call
	pointLedger  = "ledger"  // before the ledger write
	pointMetrics = "metrics" // before the settlement metrics
)

// errPanicked aborts the upstream read of a stream whose relay panicked.
var errPanicked = errors.New("proxy: stream relay panicked")

// errInternal is the answer to a request whose handler panicked.
var errInternal = apiError{status: fasthttp.StatusInternalServerError, openAIType: "api_error", openAICode: "internal_error",
	anthropicType: "api_error", message: "llmguard failed while handling this request; it has been logged (see x-llmguard-request-id)."}

// inject runs the test hook at point; nil in production.
func (p *Proxy) inject(point string) {
	if p.opt.inject != nil {
		p.opt.inject(point)
	}
}

// panicked counts and logs a recovered panic. The log carries the stack
// and a description of the value that holds no request data (see
// describePanic): never prompt text.
func (p *Proxy) panicked(stage string, r any, x *exchange) {
	p.opt.Metrics.panicked(stage)
	id := ""
	if x != nil {
		id = x.id
	}
	p.log.Error("panic recovered", "stage", stage, "request_id", id, "panic", describePanic(r), "stack", string(debug.Stack()))
}

// contain runs f in stage and recovers a panic in it, so that one failing
// step of a settlement (metrics, ledger, reconciliation) does not skip the
// others.
func (p *Proxy) contain(stage string, x *exchange, f func()) {
	defer func() {
		if r := recover(); r != nil {
			p.panicked(stage, r, x)
		}
	}()
	f()
}

// describePanic describes a recovered value without its contents unless it
// is a runtime error (whose message the runtime writes: an index, a nil
// map), since a value passed to panic may hold request data.
func describePanic(r any) string {
	var re runtime.Error
	if err, ok := r.(error); ok && errors.As(err, &re) {
		return re.Error()
	}
	return fmt.Sprintf("%T", r)
}

// recoverHandler is deferred by Handle: a panic in the handler answers 500
// in the caller's flavor, releases the upstream response it held, and
// settles the reservation once — a refund when nothing reached the
// upstream; otherwise the reservation stands, as for any answer whose usage
// is unknown.
func (p *Proxy) recoverHandler(ctx *fasthttp.RequestCtx, x *exchange) {
	r := recover()
	if r == nil {
		return
	}
	p.panicked(StageHandler, r, x)
	if x.release != nil {
		x.release()
		x.release = nil
	}
	p.contain(StageSettle, x, func() { p.settleAborted(x) })
	ctx.Response.Reset()
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.Set("x-llmguard-request-id", x.id)
	// Counted as internal_error unless the request was counted before the
	// panic (an answer already under way): once either way.
	p.answer(ctx, x, refusal{err: errInternal, outcome: outcomeInternalError})
}

// settleAborted settles an exchange its handler abandoned: a refund when
// nothing was forwarded (no ledger record: no upstream call was made), the
// reservation otherwise.
func (p *Proxy) settleAborted(x *exchange) {
	if !x.forwarded {
		if len(x.rules) == 0 {
			return // nothing taken, nothing to record
		}
		p.settle(x, settlement{refund: true, unforwarded: true})
		return
	}
	p.settle(x, settlement{})
}
