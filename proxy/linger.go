package proxy

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// A request refused before its body was read (401, 413, 503…) leaves the
// body on the wire. Closing the connection at once would have the kernel
// reset it (unread data), and a client still sending would often lose the
// answer to the reset: Go's and Python's HTTP clients then report a write
// error instead of the 401. So llmguard does what net/http's server does
// (closeWriteAndWait): it writes the answer, shuts its side of the
// connection (the client sees the answer end), waits lingerFor without
// reading a byte, and closes.

// lingerFor is how long a refused connection stays half-open after its
// answer: net/http's rstAvoidanceDelay.
const lingerFor = 500 * time.Millisecond

// maxLingering bounds the refused connections lingering at once; past it,
// a refused connection is closed right after its answer.
const maxLingering = 1024

// closeUnread makes the answer in ctx the connection's last one: it is
// written, and the connection closed without reading what is left of the
// request body.
func (p *Proxy) closeUnread(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if p.lingering.Add(1) > maxLingering {
		p.lingering.Add(-1)
		return // fasthttp writes the answer and closes at once
	}
	conn := ctx.Conn()
	answer := []byte(ctx.Response.String())
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(net.Conn) { // fasthttp closes conn when this returns
		defer p.lingering.Add(-1)
		conn.SetWriteDeadline(time.Now().Add(lingerFor))
		if _, err := conn.Write(answer); err != nil {
			return
		}
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		time.Sleep(lingerFor)
	})
}
