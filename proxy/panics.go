package proxy

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
)

// Injection points of Options' test hook, inside the stages above: the hook
// runs at each, and a hook that panics is recovered like any other panic.
const (
	pointHandler = "handler"          // after identification, before weighing
	pointForward = "forward"          // after the take, just before the upstream call
	pointStream  = "stream"           // each read of a streamed answer
	pointTap     = "tap"              // each usage-tap feed of a streamed answer
	pointWatch   = "watch"            // each look of the client watch at a client
	pointSettle  = meter.PointSettle  // before the reconciliation store call
	pointLedger  = meter.PointLedger  // before the ledger write
	pointMetrics = meter.PointMetrics // before the settlement metrics
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

// panicked counts and logs a recovered panic (see meter.Meter.Recovered:
// the log never holds request data).
func (p *Proxy) panicked(stage string, r any, x *exchange) {
	id := ""
	if x != nil {
		id = x.id
	}
	p.meter.Recovered(stage, r, id)
}

// contain runs f in stage and recovers a panic in it, so that one failing
// step (counting, settling) does not skip the others.
func (p *Proxy) contain(stage string, x *exchange, f func()) { p.meter.Contain(stage, x.id, f) }

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
	p.panicked(meter.StageHandler, r, x)
	x.releaseHeld()
	p.contain(meter.StageSettle, x, func() { settleAborted(x) })
	ctx.Response.Reset()
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.Set("x-llmguard-request-id", x.id)
	// Counted as internal_error unless the request was counted before the
	// panic (an answer already under way): once either way.
	p.answer(ctx, x, refusal{err: errInternal, outcome: meter.OutcomeInternalError})
}

// settleAborted settles an exchange its handler abandoned: a refund when
// nothing was forwarded (no ledger record: no upstream call was made), the
// reservation otherwise. Nothing happens before admission, or after a
// refusal (nothing was taken).
func settleAborted(x *exchange) {
	if !x.forwarded {
		x.settle(meter.Settlement{Source: spec.SourceRefund, Unforwarded: true})
		return
	}
	x.settle(meter.Settlement{Source: spec.SourceReserved})
}
