package proxy

import (
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/bufpool"
)

// newBodyPool is the body pool of a proxy whose body budget is budget
// bytes: at most min(budget/8, maxPooledBodyBytes) kept idle.
func newBodyPool(budget int64) *bufpool.Pool { return bufpool.New(min(budget/8, maxPooledBodyBytes)) }

// The request body is read by the handler, not by fasthttp: the server runs
// with StreamRequestBody, so a request reaches Handle once its headers have
// arrived (fasthttp v1.78 has read at most 8 KiB of the body by then, into
// its per-connection buffer). Handle refuses an unknown caller from the
// headers alone and only then reads the body, within max_body_bytes, and
// only while the bytes of every body held at once stay within
// max_inflight_body_bytes.

// bodyBudgetRetry is the Retry-After of a request refused because the
// bodies in memory already fill max_inflight_body_bytes: bodies are held
// only while they are read and forwarded, so room comes back within
// seconds.
const bodyBudgetRetry = 1 // second

// bodyGrowStep is the smallest step, in bytes, by which a chunked body's
// buffer grows (and takes from the budget).
const bodyGrowStep = 64 << 10

var (
	errBodyBudget = apiError{status: fasthttp.StatusServiceUnavailable, openAIType: "api_error", openAICode: "server_overloaded",
		anthropicType: "overloaded_error", message: "llmguard holds as many request bodies as it may (max_inflight_body_bytes). Please retry shortly."}
	errBodyRead = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_body",
		anthropicType: "invalid_request_error", message: "The request body ended before its declared length, or its chunked framing is broken."}
)

// heldBody is a request body read into memory and the bytes it holds of
// the budget; release gives them back.
type heldBody struct {
	b      []byte
	held   int64
	tenant string // whose share of the budget held counts against
	// pooled is the buffer b was read into when it came from the proxy's
	// body pool (b may be a decoded copy since): given back when the
	// request is done.
	pooled []byte
}

// maxPooledBodyBytes bounds the body pool (internal/bufpool): the buffers
// of bodies read by Content-Length are reused by later requests, up to
// this many bytes of them kept idle (or an eighth of the body budget, if
// less). Reuse spares each request the zeroing of a fresh buffer and the
// heap the garbage collector would sweep for it (at 128 KiB, a cycle
// every hundred requests).
const maxPooledBodyBytes = 32 << 20

// readBody reads the request body of ctx into memory, taking its bytes from
// the body budget first: by Content-Length when it is declared, step by
// step as the buffer grows when it is chunked. It never waits for room:
// a body that does not fit is refused at once (503), so a request that
// holds bytes never waits on one that holds others. Refusals: a body over
// max_body_bytes (413: by its Content-Length before a byte is read, or as
// soon as a chunked body passes it), no room in the budget (503), a body
// that breaks off (400). On a refusal nothing stays held.
func (p *Proxy) readBody(ctx *fasthttp.RequestCtx, tenant string) (h heldBody, refusal apiError, ok bool) {
	h.tenant = tenant
	limit := p.opt.MaxBodyBytes
	cl := ctx.Request.Header.ContentLength()
	if cl > limit {
		return heldBody{}, errBodyTooLarge, false
	}
	st := ctx.RequestBodyStream()
	if st == nil { // a server that read the body whole (tests over in-memory listeners)
		b := ctx.Request.Body()
		if len(b) > limit {
			return heldBody{}, errBodyTooLarge, false
		}
		if !p.hold(tenant, int64(len(b))) {
			return heldBody{}, errBodyBudget, false
		}
		// Copied out of the request's buffer: Handle sets the body it holds
		// with SetBodyRaw, which gives that buffer back to fasthttp's pool
		// when the request may (a RequestCtx made by hand, a server with
		// ReduceMemoryUsage), and another request's body read into it would
		// then be weighed and forwarded (TestBodyReadWholeNotGivenBack).
		h = heldBody{b: p.bodyPool.Get(len(b)), held: int64(len(b)), tenant: tenant}
		h.pooled = h.b
		copy(h.b, b)
		return h, apiError{}, true
	}
	if cl >= 0 {
		if !p.hold(tenant, int64(cl)) {
			return heldBody{}, errBodyBudget, false
		}
		h = heldBody{b: p.bodyPool.Get(cl), held: int64(cl), tenant: tenant}
		h.pooled = h.b
		if _, err := io.ReadFull(st, h.b); err != nil {
			p.release(h)
			p.bodyPool.Put(h.pooled)
			return heldBody{}, errBodyRead, false
		}
		return h, apiError{}, true
	}
	// Chunked: grow the buffer as the body arrives, taking each growth from
	// the budget before allocating it, up to the limit.
	for {
		if len(h.b) == cap(h.b) {
			if cap(h.b) >= limit {
				// Full at the limit: the body must end here.
				var one [1]byte
				_, err := io.ReadAtLeast(st, one[:], 1)
				if errors.Is(err, io.EOF) {
					return h, apiError{}, true
				}
				p.release(h)
				if err == nil {
					return heldBody{}, errBodyTooLarge, false
				}
				return heldBody{}, errBodyRead, false
			}
			grow := min(max(cap(h.b), bodyGrowStep), limit-cap(h.b))
			if !p.hold(tenant, int64(grow)) {
				p.release(h)
				return heldBody{}, errBodyBudget, false
			}
			nb := make([]byte, len(h.b), cap(h.b)+grow)
			copy(nb, h.b)
			h.b, h.held = nb, h.held+int64(grow)
		}
		n, err := st.Read(h.b[len(h.b):cap(h.b)])
		h.b = h.b[:len(h.b)+n]
		if errors.Is(err, io.EOF) {
			return h, apiError{}, true
		}
		if err != nil {
			p.release(h)
			return heldBody{}, errBodyRead, false
		}
	}
}

// hold takes n bytes from the body budget for tenant if they are free,
// without waiting. One tenant may hold at most a quarter of the budget (at
// least max_body_bytes): a tenant whose uploads stall — slowly, or on
// purpose — fills its own share, never every other tenant's.
func (p *Proxy) hold(tenant string, n int64) bool {
	if n == 0 {
		return true
	}
	p.shareMu.Lock()
	s := p.shares[tenant]
	if s == nil {
		s = new(int64)
		p.shares[tenant] = s
	}
	if *s+n > p.shareCap {
		p.dropIdleShare(tenant, *s)
		p.shareMu.Unlock()
		return false
	}
	*s += n
	p.shareMu.Unlock()
	if !p.bodies.TryAcquire(n) {
		p.unshare(tenant, n)
		return false
	}
	p.opt.Metrics.BodyBytesHeld(n)
	return true
}

// unshare gives n bytes back to tenant's share, taken by hold.
func (p *Proxy) unshare(tenant string, n int64) {
	p.shareMu.Lock()
	if s := p.shares[tenant]; s != nil {
		*s -= n
		p.dropIdleShare(tenant, *s)
	}
	p.shareMu.Unlock()
}

// maxIdleShares is the most tenants p.shares keeps an entry for while
// they hold no body bytes: past it, an entry that falls to zero is
// dropped, so that the map holds at most this many idle tenants (callers
// identified by their own upstream keys are as many as their keys) plus
// those holding bytes.
const maxIdleShares = 1024

// dropIdleShare drops tenant's entry, whose bytes held are now held, when
// it holds none and the map is past maxIdleShares. shareMu must be held.
func (p *Proxy) dropIdleShare(tenant string, held int64) {
	if held <= 0 && len(p.shares) > maxIdleShares {
		delete(p.shares, tenant)
	}
}

// release gives h's bytes back to the body budget.
func (p *Proxy) release(h heldBody) {
	if h.held > 0 {
		p.bodies.Release(h.held)
		p.unshare(h.tenant, h.held)
		p.opt.Metrics.BodyBytesHeld(-h.held)
	}
}

// releaseBody drops ctx's reference to the body read into h and gives its
// bytes back to the budget, and its buffer to the pool, once the request
// no longer needs them: after forward returned (the upstream request,
// released, held it too). Nothing the request leaves behind may alias the
// body (the weigher's estimate copies the strings it keeps).
func (p *Proxy) releaseBody(ctx *fasthttp.RequestCtx, h heldBody) {
	ctx.Request.ResetBody()
	p.release(h)
	p.bodyPool.Put(h.pooled)
}

// unreadBody reports whether ctx's request still has body bytes on the
// wire that the handler did not read.
func unreadBody(ctx *fasthttp.RequestCtx) bool {
	return ctx.RequestBodyStream() != nil && ctx.Request.Header.ContentLength() != 0
}
