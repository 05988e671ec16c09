package proxy

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
)

// waitWatchEvery is how often the connections of held requests are looked
// at: a client that leaves while its request waits is dropped, and its
// queue slot freed, within this long.
const waitWatchEvery = 50 * time.Millisecond

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
func (c *clientWatcher) Watch() (<-chan struct{}, func()) { return c.p.waiting.add(c.p, c.conn) }

// connWatch looks, every waitWatchEvery, at the connections of the requests
// held waiting, from one goroutine for all of them (running while any is
// watched): a connection whose client closed or reset it has its gone
// channel closed. Its cost is one non-blocking recv (MSG_PEEK) per held
// request per tick, bounded by wait_queue.total. A connection with no
// socket to look at (an in-memory listener) is never seen to close. The
// zero value is ready to use; safe for concurrent use.
type connWatch struct {
	mu      sync.Mutex
	conns   map[*watched]struct{}
	running bool
}

type watched struct {
	conn net.Conn
	gone chan struct{}
}

// add watches conn until stop is called; gone is closed if its client
// leaves first.
func (w *connWatch) add(p *Proxy, conn net.Conn) (gone <-chan struct{}, stop func()) {
	c := &watched{conn: conn, gone: make(chan struct{})}
	w.mu.Lock()
	if w.conns == nil {
		w.conns = map[*watched]struct{}{}
	}
	w.conns[c] = struct{}{}
	if !w.running {
		w.running = true
		go w.run(p)
	}
	w.mu.Unlock()
	return c.gone, func() {
		w.mu.Lock()
		delete(w.conns, c)
		w.mu.Unlock()
	}
}

// run looks at the watched connections every waitWatchEvery until none is
// left. A panic is contained and counted (stage watch).
func (w *connWatch) run(p *Proxy) {
	defer func() {
		if r := recover(); r != nil {
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
			p.panicked(meter.StageWatch, r, nil)
		}
	}()
	t := time.NewTicker(waitWatchEvery)
	defer t.Stop()
	var batch []*watched
	for range t.C {
		w.mu.Lock()
		if len(w.conns) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch = batch[:0]
		for c := range w.conns {
			batch = append(batch, c)
		}
		w.mu.Unlock()
		for _, c := range batch {
			if closed, ok := peerClosed(c.conn); ok && closed {
				w.mu.Lock()
				if _, still := w.conns[c]; still {
					delete(w.conns, c)
					close(c.gone)
				}
				w.mu.Unlock()
			}
		}
	}
}

// Waits is the queues of requests held waiting for their buckets (nil when
// none can wait), for metrics and tests.
func (p *Proxy) Waits() *meter.Waits { return p.opt.Waits }
