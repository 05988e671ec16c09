package proxy

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// A request whose client leaves before the upstream's answer head arrives
// (a non-streamed call while the model generates, or a stream the upstream
// has queued) has its upstream connection closed, as a stream's is once its
// head has come (relay): the upstream stops generating for nobody, and the
// request's body bytes, its upstream connection and its in-flight slot are
// given back within about streamWatchEvery, instead of when the upstream
// answers or upstreams[].timeout (10 minutes by default) passes. fasthttp's
// HostClient takes no cancellation and names no connection before it
// answers, so the body is handed to it as a stream of known length
// (sentBody): fasthttp writes it from the goroutine that sends the request,
// after it has taken a connection and recorded it on the answer
// (Response.ParseNetConn), which is how sentBody finds the connection to
// close. The bytes on the wire are the same as SetBodyRaw's
// (Content-Length framing).

// sentBody is a request body being sent upstream, and the watch of its
// client until the upstream's answer head arrives: left is the watch's flag
// (set when the client has gone), conn the connection the body was written
// on. Safe for the watch's goroutine and the sending one.
type sentBody struct {
	b    []byte
	resp *fasthttp.Response // read only by the sending goroutine
	left watchFlag
	conn atomic.Pointer[upstreamConn]
	off  int // Read's offset (fasthttp uses WriteTo)
}

// sentBodies are the sentBody values of the requests being sent.
var sentBodies = sync.Pool{New: func() any { return new(sentBody) }}

// sendsAsStream reports whether req's body of n bytes goes as a sentBody:
// a body without trailer fields (which fasthttp sends chunked from raw
// bytes only).
func sendsAsStream(req *fasthttp.Request, n int) bool {
	return n > 0 && len(req.Header.PeekTrailerKeys()) == 0
}

// SupportsBodyWriteTo tells fasthttp to write the body with WriteTo.
func (s *sentBody) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the body to w, fasthttp's writer on the connection that
// s.resp names: that connection is recorded first, and closed at once when
// the client has left already (errClientGone).
func (s *sentBody) WriteTo(w io.Writer) (int64, error) {
	if err := s.claim(); err != nil {
		return 0, err
	}
	n, err := w.Write(s.b)
	return int64(n), err
}

// Read implements io.Reader for a copy fasthttp might make without WriteTo.
func (s *sentBody) Read(p []byte) (int, error) {
	if s.off == 0 {
		if err := s.claim(); err != nil {
			return 0, err
		}
	}
	if s.off >= len(s.b) {
		return 0, io.EOF
	}
	n := copy(p, s.b[s.off:])
	s.off += n
	return n, nil
}

// claim records the connection the body is being written on; when the
// client has left, it closes it and returns errClientGone. The watch sets
// left before it loads conn, claim stores conn before it loads left: one of
// them closes the connection.
func (s *sentBody) claim() error {
	a, ok := s.resp.LocalAddr().(connAddr)
	if !ok {
		return nil
	}
	s.conn.Store(a.conn)
	if s.left.Load() {
		a.conn.tcp.Close()
		return errClientGone
	}
	return nil
}

// reset makes s the body b, whose answer is resp, not yet sent nor
// watched.
func (s *sentBody) reset(b []byte, resp *fasthttp.Response) {
	s.b, s.resp, s.off = b, resp, 0
	s.left.Store(false)
	s.conn.Store(nil)
}

// rewind makes s ready to be sent again on another connection.
func (s *sentBody) rewind() {
	s.off = 0
	s.conn.Store(nil)
}

// CloseWithError implements watchAction: the client has left, so the
// connection the body went on (if any yet) is closed, which ends the
// wait for the answer head with an error.
func (s *sentBody) CloseWithError(error) error {
	if c := s.conn.Load(); c != nil {
		// The socket, not the TLS session: tls.Conn.Close would first
		// write its close_notify, waiting up to 5 s for a socket the
		// sending goroutine may be blocked writing on.
		c.tcp.Close()
	}
	return nil
}
