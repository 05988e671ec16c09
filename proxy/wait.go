package proxy

import (
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
)

// errClientLeft answers (to nobody: the client has gone) a request whose
// client left while it waited for its buckets; 499 is the status nginx
// logs for a client that closed its request.
var errClientLeft = apiError{status: 499, openAIType: "api_error", openAICode: "client_closed_request",
	anthropicType: "api_error", message: "The client closed the connection while the request waited for its limits."}

// setWaitHeader says, in x-llmguard-wait-ms, how long a request was held
// waiting for its buckets (on_limit: wait), in whole milliseconds rounded
// up; nothing when it was not held.
func setWaitHeader(h *fasthttp.ResponseHeader, m *meter.Exchange) {
	if m.Held() {
		var b [24]byte
		h.SetBytesV("x-llmguard-wait-ms", strconv.AppendInt(b[:0], ceilMS(m.Waited()), 10))
	}
}

// watcher is the meter.Request.Watch of x, the request in ctx: it watches
// the client's connection while the request waits. nil when no limit can
// wait. It costs no allocation (the watcher lives in x).
func (p *Proxy) watcher(ctx *fasthttp.RequestCtx, x *exchange) meter.Watcher {
	if p.opt.Waits == nil {
		return nil
	}
	x.watch = clientWatcher{p: p, conn: ctx.Conn()}
	return &x.watch
}

// clientWatcher is a meter.Watcher of one client connection.
type clientWatcher struct {
	p    *Proxy
	conn net.Conn
}

// Watch implements meter.Watcher.
func (c *clientWatcher) Watch() (<-chan struct{}, func()) { return c.p.watch.addHeld(c.p, c.conn) }

// Waits is the queues of requests held waiting for their buckets (nil when
// none can wait), for metrics and tests.
func (p *Proxy) Waits() *meter.Waits { return p.opt.Waits }
