package proxy

import (
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/llmguard/llmguard/internal/bufpool"
)

// A non-streamed upstream answer is held whole to read its usage, and the
// bytes of every answer held at once stay within max_inflight_response_bytes
// (Options.ResponseBudget), as request bodies stay within
// max_inflight_body_bytes. The buffer an answer is read into grows as its
// bytes arrive, each growth taken from the budget before it is allocated,
// without waiting; an answer that finds no room is streamed through to the
// client unread and keeps its reservation, as one over max_response_bytes
// does. Its bytes are given back when fasthttp has written the answer to
// the client (heldAnswer.Close, called by fasthttp as it resets the
// request: see heldAnswer), on every error path, and when the client has
// left. A compressed answer's decoded copy (tapView) is taken from the same
// budget, for the time its usage is read.

// answerBudget is the budget of answer bytes held in memory: held never
// exceeds max once take succeeded. The zero value holds nothing and refuses
// every take. Safe for concurrent use.
type answerBudget struct {
	max  int64
	held atomic.Int64
}

// take takes n bytes if they are free, without waiting; a refusal changes
// nothing.
func (b *answerBudget) take(n int64) bool {
	for {
		h := b.held.Load()
		if h+n > b.max {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// give gives n bytes back.
func (b *answerBudget) give(n int64) { b.held.Add(-n) }

// maxPooledAnswerBytes bounds the answer pool: the grown buffers of answers
// larger than readChunk are reused by later answers, up to this many bytes
// of them kept idle (or an eighth of the answer budget, if less), as the
// body pool keeps request bodies' (maxPooledBodyBytes).
const maxPooledAnswerBytes = 32 << 20

// newAnswerPool is the answer pool of a proxy whose answer budget is budget
// bytes.
func newAnswerPool(budget int64) *bufpool.Pool {
	return bufpool.New(min(budget/8, maxPooledAnswerBytes))
}

// answerKey is the RequestCtx user value under which the held answer of a
// request is registered; fasthttp closes it (io.Closer) when it resets the
// request, after the answer was written.
type answerKey struct{}

// Unread reasons: why an answer (or its decoded copy) was not read for its
// usage; the reason label of llmguard_responses_unread_total.
const (
	// unreadBudget: the answers held fill max_inflight_response_bytes; it was
	// streamed through unread.
	unreadBudget = "budget"
	// unreadTooLarge: the answer is over max_response_bytes; streamed
	// through unread.
	unreadTooLarge = "too_large"
	// unreadDecodeBudget: a compressed answer held whole whose decoded copy,
	// or a compressed answer or stream whose zstd window, found no room in
	// the budget; relayed as received, its usage not read.
	unreadDecodeBudget = "decode_budget"
	// unreadWindow: a zstd answer whose window is over answerWindowMax
	// (8 MiB, RFC 9659 §3); relayed as received, its usage not read.
	unreadWindow = "decode_window"
	// unreadUndecodable: a compressed answer in a coding llmguard does not
	// decode (br, one applied twice, an unknown one) or not valid in its
	// coding (a broken header, corrupt data); relayed as received, its
	// usage not read.
	unreadUndecodable = "undecodable"
)

// unreadLogEvery is the least time between two log lines about answers
// passed through unread for want of room.
const unreadLogEvery = 10 * time.Second

// newUnreadLog returns the limiter of those log lines: the first at once.
func newUnreadLog() *rate.Sometimes { return &rate.Sometimes{First: 1, Interval: unreadLogEvery} }

// heldAnswer is an upstream answer (or a decoded copy of one) read into
// memory; it holds buf's capacity of the answer budget. Its buffer is the
// pooled readChunk array first (an answer of at most readChunk bytes, the
// common case, is read into it and written from it: no copy, no
// allocation), then a buffer of the answer pool, twice as large at each
// growth (never readChunk bytes: the capacity tells the two apart). The
// zero value with p set holds nothing. Not safe for concurrent use: the
// handler fills it, and fasthttp closes it on the same connection's
// goroutine once the answer is written.
//
// Close gives everything back; it is what fasthttp calls, through the
// request's user values (fasthttp v1.78, Request.Reset: "it should be at
// the top, since some values might implement io.Closer interface"), both
// after the response was written (server.go, serveConn: ctx.Request.Reset
// after writeResponse) and when the connection ends on an error, the
// client's departure included (releaseCtx → RequestCtx.reset →
// Request.Reset). Close is idempotent: the error paths release at once.
type heldAnswer struct {
	p   *Proxy
	buf []byte
}

// Close gives the answer's bytes back to the budget and its buffer to its
// pool. It never fails.
func (h *heldAnswer) Close() error {
	h.release()
	return nil
}

// release gives the answer's bytes back; nothing of it may be read after.
func (h *heldAnswer) release() {
	if h.buf == nil {
		return
	}
	h.give(int64(cap(h.buf)))
	h.put(h.buf)
	h.buf = nil
}

// put gives b, one of h's buffers, back to its pool.
func (h *heldAnswer) put(b []byte) {
	if cap(b) == readChunk {
		chunks.Put((*[readChunk]byte)(b[:readChunk]))
		return
	}
	h.p.answerPool.Put(b)
}

// take takes n bytes from the budget for h.
func (h *heldAnswer) take(n int64) bool {
	if !h.p.answers.take(n) {
		return false
	}
	h.p.opt.Metrics.ResponseBytesHeld(n)
	return true
}

// give gives n of h's bytes back to the budget.
func (h *heldAnswer) give(n int64) {
	h.p.answers.give(n)
	h.p.opt.Metrics.ResponseBytesHeld(-n)
}

// readFrom reads r into h.buf until r ends or h.buf holds limit bytes,
// growing the buffer as the bytes arrive; size is the length r declared
// (-1: none), which caps the growth. Each growth is taken from the budget
// before its buffer is allocated, without waiting: full reports that the
// budget had no room for one, and reading stopped there (h.buf holds what
// was read). err is r's error other than io.EOF. h holds at most limit
// bytes, rounded up to the pool's size class, plus, while a growth copies,
// the buffer it replaces. end, when not nil, sees every byte read, and a
// read it cut (answerEnd.ended) ends r as io.EOF does.
func (h *heldAnswer) readFrom(r io.Reader, limit, size int, end *answerEnd) (full bool, err error) {
	empty := 0 // reads in a row that returned nothing
	for len(h.buf) < limit {
		if len(h.buf) == cap(h.buf) {
			if len(h.buf) == size {
				// All the declared bytes are here: the stream ends now (a
				// read of nothing confirms it, without a larger buffer).
				var probe [1]byte
				n, err := r.Read(probe[:])
				for tries := 1; n == 0 && err == nil && tries < 100; tries++ {
					n, err = r.Read(probe[:])
				}
				if n == 0 {
					if err == io.EOF {
						return false, nil
					}
					if err == nil {
						err = io.ErrNoProgress // fasthttp's stream ends with io.EOF
					}
					return false, err
				}
				// More than declared (a framing fasthttp did not check):
				// read on as if no size were known.
				size = -1
				if !h.grow(limit, size) {
					return true, nil
				}
				h.buf = append(h.buf, probe[0])
				continue
			}
			if !h.grow(limit, size) {
				return true, nil
			}
		}
		n, err := r.Read(h.buf[len(h.buf):cap(h.buf)][:min(cap(h.buf)-len(h.buf), limit-len(h.buf))])
		end.saw(h.buf[len(h.buf) : len(h.buf)+n])
		h.buf = h.buf[:len(h.buf)+n]
		if err == io.EOF || err != nil && end.ended() {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if empty = empty + 1; n > 0 {
			empty = 0
		} else if empty >= 100 { // as bufio gives up on a reader that never progresses
			return false, io.ErrNoProgress
		}
	}
	return false, nil
}

// grow gives h a buffer with room for more bytes (the pooled chunk first,
// then twice the capacity, capped at size when known and at limit), its
// capacity taken from the budget first; false when the budget has no room
// for it (h unchanged).
func (h *heldAnswer) grow(limit, size int) bool {
	if h.buf == nil {
		if !h.take(readChunk) {
			return false
		}
		h.buf = chunks.Get().(*[readChunk]byte)[:0]
		return true
	}
	want := 2 * cap(h.buf)
	if size > len(h.buf) {
		want = min(want, size)
	}
	want = max(min(want, limit), readChunk+1) // never readChunk: see heldAnswer
	// bufpool gives a buffer of capacity at most a quarter above the length
	// asked for (a reused one of a larger class): take that much, and give
	// back what the buffer does not use.
	upper := int64(want + want/4)
	if !h.take(upper) {
		return false
	}
	nb := h.p.answerPool.Get(want)
	h.give(upper - int64(cap(nb)))
	nb = append(nb[:0], h.buf...)
	h.give(int64(cap(h.buf)))
	h.put(h.buf)
	h.buf = nb
	return true
}

// unread counts an answer whose usage was not read for reason (an unread
// constant) and, for want of room (unreadBudget, unreadDecodeBudget), logs
// it at most once every unreadLogEvery.
func (p *Proxy) unread(x *exchange, reason string) {
	p.opt.Metrics.ResponseUnread(reason)
	if reason != unreadBudget && reason != unreadDecodeBudget {
		return
	}
	p.unreadLog.Do(func() {
		p.log.Warn("upstream answers are relayed unread, keeping their reservations: the answers held fill max_inflight_response_bytes",
			"reason", reason, "held_bytes", p.answers.held.Load(), "max_inflight_response_bytes", p.answers.max,
			"upstream", x.upstream.Name, "request_id", x.id, "next_line_after", unreadLogEvery)
	})
}

// ResponseBytesHeld is the answer bytes held in memory now, of
// Options.ResponseBudget (the gauge llmguard_response_body_bytes_in_flight
// shows the same): zero once every answer has been written.
func (p *Proxy) ResponseBytesHeld() int64 { return p.answers.held.Load() }

var _ io.Closer = (*heldAnswer)(nil)
