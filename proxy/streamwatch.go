package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
)

// streamWatchEvery is how often the clients of the answers being relayed
// (streams, and answers too large to hold) are looked at: a client that
// leaves while its upstream sends nothing (thinking, queued) has the
// upstream cut within about this long. A stream's first look comes at the
// watch's next sweep, at most this long after the stream starts.
const streamWatchEvery = 500 * time.Millisecond

// streamWatch looks, every streamWatchEvery, at the client of every answer
// being relayed, from one goroutine for all of them (running while any is
// watched, started again by the next answer after it stops): a client that
// closed or reset its connection has its answer's cut flag set and its
// upstream read cut (errClientGone), and that answer only. An answer costs
// no goroutine, timer or allocation of its own: one entry in a map whose
// slots are reused, and one non-blocking poll(2) of its client per sweep.
// A connection with no socket to look at (an in-memory listener) is
// dropped from the watch at its first sweep: its client is noticed at the
// next write instead. The zero value is ready to use; safe for concurrent
// use.
type streamWatch struct {
	mu      sync.Mutex
	streams map[*atomic.Bool]watchedStream // by the answer's cut flag
	running bool
	// onSweep, when set (tests), is called after each sweep, outside mu;
	// set before the first answer is watched.
	onSweep func()
}

// watchedStream is one watched answer: its exchange (named when a panic is
// recovered), its client's connection and its upstream body.
type watchedStream struct {
	x        *exchange
	conn     net.Conn
	upstream fasthttp.ReadCloserWithError
}

// add watches s's client until remove(cut) is called: when the client
// leaves first, cut is set, then s.upstream is closed with errClientGone.
// cut must not be watched already.
func (w *streamWatch) add(p *Proxy, cut *atomic.Bool, s watchedStream) {
	w.mu.Lock()
	if w.streams == nil {
		w.streams = map[*atomic.Bool]watchedStream{}
	}
	w.streams[cut] = s
	if !w.running {
		w.running = true
		go w.run(p)
	}
	w.mu.Unlock()
}

// remove ends the watch of the answer whose cut flag is cut; once it
// returns the watch neither sets cut nor touches the upstream body, which
// the caller may then release.
func (w *streamWatch) remove(cut *atomic.Bool) {
	w.mu.Lock()
	delete(w.streams, cut)
	w.mu.Unlock()
}

// watchedConn is a sweep's copy of one entry.
type watchedConn struct {
	cut  *atomic.Bool
	conn net.Conn
	x    *exchange
}

// run sweeps the watched answers every streamWatchEvery until none is left
// at a sweep. The sockets are looked at outside the lock, from a copy of
// the entries; an entry is acted on only when it is still watched with the
// same connection. A panic is contained and counted (stage watch, naming
// the answer being looked at), and the next answer watched starts the
// goroutine again.
func (w *streamWatch) run(p *Proxy) {
	var cur *exchange
	defer func() {
		if r := recover(); r != nil {
			w.mu.Lock()
			w.running = false
			w.mu.Unlock()
			p.panicked(meter.StageWatch, r, cur)
		}
	}()
	t := time.NewTicker(streamWatchEvery)
	defer t.Stop()
	var batch []watchedConn
	for range t.C {
		w.mu.Lock()
		if len(w.streams) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		for cut, s := range w.streams {
			batch = append(batch, watchedConn{cut: cut, conn: s.conn, x: s.x})
		}
		w.mu.Unlock()
		for _, c := range batch {
			cur = c.x
			if closed, ok := peerClosed(c.conn); !ok || closed {
				w.drop(c, closed)
			}
		}
		cur = nil
		clear(batch) // keep no exchange alive until the next sweep
		batch = batch[:0]
		if w.onSweep != nil {
			w.onSweep()
		}
	}
}

// drop ends the watch of c when it is still watched with c's connection;
// when its client has left (gone), it sets c's cut flag and closes its
// upstream body first, under the lock, so that remove waits for the cut
// to be done before the caller releases that body.
func (w *streamWatch) drop(c watchedConn, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, still := w.streams[c.cut]
	if !still || s.conn != c.conn {
		return
	}
	delete(w.streams, c.cut)
	if gone {
		c.cut.Store(true)
		s.upstream.CloseWithError(errClientGone)
	}
}
