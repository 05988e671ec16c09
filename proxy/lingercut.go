package proxy

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// A stream's terminal event ("data: [DONE]", response.completed,
// .incomplete or .failed, message_stop: weigher.Stream.Done) is the last
// thing its upstream has to say, but the stream ends for llmguard only
// when the upstream ends its body (the last chunk, or its connection's
// close). An upstream that does neither held the caller's answer open,
// and its settlement and ledger record back, until the upstream timeout
// (10 minutes by default): a caller that reads to the end of the body
// (curl, an SDK's raw stream) hung that long. So once the terminal event
// has been relayed, an upstream silent for streamEndGrace is cut
// (lingerCut): the caller's answer ends as a whole stream does, and the
// stream is settled from what it reported. Bytes that come within the
// grace are relayed as before and start it again.

// defaultStreamEndGrace is Options.StreamEndGrace's zero value: how long
// an upstream may stay silent after a stream's terminal event before the
// stream is ended for it. An upstream ends its body in the same write as
// the terminal event or right after it.
const defaultStreamEndGrace = 2 * time.Second

// errUpstreamLingered cuts the read of an upstream that neither ended its
// body nor closed its connection within the grace after the stream's
// terminal event.
var errUpstreamLingered = errors.New("proxy: the upstream neither ended nor closed the stream after its terminal event")

// streamEndGrace is Options.StreamEndGrace, or its default.
func (p *Proxy) streamEndGrace() time.Duration {
	if p.opt.StreamEndGrace > 0 {
		return p.opt.StreamEndGrace
	}
	return defaultStreamEndGrace
}

// lingerCut cuts an upstream body's read once it has been silent for a
// grace after its stream's terminal event. The zero value is disarmed.
// arm and stop are called from the stream's goroutine, the cut from its
// timer's; after stop returns no cut is made. Its timer comes from
// lingerTimers, so that the streams that arm one (every stream whose
// upstream sends a terminal event) allocate nothing for it.
type lingerCut struct {
	t *lingerTimer
	// cut: the timer fired and cut the read: the read's error is the
	// upstream's silence, not a break.
	cut bool
}

// lingerTimer is a pooled timer that cuts rc when it fires, unless
// stopped first.
type lingerTimer struct {
	timer   *time.Timer
	mu      sync.Mutex // orders the cut and stop
	rc      fasthttp.ReadCloserWithError
	stopped bool
	fired   atomic.Bool
}

// lingerTimers are stopped lingerTimers, each with its timer made once.
var lingerTimers = sync.Pool{New: func() any {
	lt := &lingerTimer{}
	lt.timer = time.AfterFunc(time.Hour, lt.fire)
	lt.timer.Stop()
	return lt
}}

// fire cuts lt's read unless lt was stopped.
func (lt *lingerTimer) fire() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.stopped || lt.rc == nil {
		return
	}
	lt.fired.Store(true)
	lt.rc.CloseWithError(errUpstreamLingered)
}

// arm starts the grace, or starts it again after more bytes came: raw's
// read is cut with errUpstreamLingered when grace passes first. A body
// that is no fasthttp.ReadCloserWithError (none in production) is not
// cut.
func (l *lingerCut) arm(raw any, grace time.Duration) {
	if l.t != nil {
		// Started again only while it has not fired: each arming fires
		// at most once, so that stop knows when fire is done with it.
		if l.t.timer.Stop() {
			l.t.timer.Reset(grace)
		}
		return
	}
	rc, ok := raw.(fasthttp.ReadCloserWithError)
	if !ok {
		return
	}
	lt := lingerTimers.Get().(*lingerTimer)
	lt.rc, lt.stopped = rc, false
	lt.fired.Store(false)
	l.t = lt
	lt.timer.Reset(grace)
}

// stop disarms l, waiting for a cut being made, and records in l.cut
// whether one was; a cut already made stands. Called once the stream's
// reads are over, before its body is released; again, it does nothing.
func (l *lingerCut) stop() {
	lt := l.t
	if lt == nil {
		return
	}
	l.t = nil
	pending := lt.timer.Stop() // true: fire will not run
	lt.mu.Lock()
	lt.stopped, lt.rc = true, nil
	l.cut = lt.fired.Load()
	lt.mu.Unlock()
	if pending || l.cut {
		// fire will not run again for this arming (it ran, or it was
		// stopped before): the timer may serve another stream.
		lingerTimers.Put(lt)
	}
	// Else fire may still be about to run (it found the lock taken): it
	// will find lt stopped; lt is left to the collector, not reused, so
	// that it cannot cut another stream's read.
}

// fired reports whether l's timer cut the read (before stop).
func (l *lingerCut) fired() bool {
	return l.cut || l.t != nil && l.t.fired.Load()
}
