package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Keep-alive connections to an upstream close under two clocks: llmguard's
// (Upstream.IdleTimeout, kept below the upstreams' own) and the upstream's
// (its keep-alive timeout, a restart, a load balancer draining). When the
// upstream's closes first, the next request sent on that connection fails
// although the upstream is fine. llmguard applies net/http's rule
// (Transport.shouldRetryRequest): a request that failed on a reused
// connection is sent again, once, on a fresh one, when the upstream cannot
// have seen it (not a byte of it was written: before writing, the idle
// connection is checked for the upstream's goodbye, as net/http's
// background reader would have noticed it) or when it may be repeated (a
// GET, HEAD, OPTIONS or TRACE; never a POST, Idempotency-Key or not) and no
// byte of the answer came back. Nothing else is retried: an LLM call
// the upstream may have started is never sent twice, and a failure on a
// fresh connection is the upstream's answer.

// errIdleClosed is the write error of a request on a reused connection the
// upstream has already closed: nothing was written.
var errIdleClosed = errors.New("proxy: the upstream closed the idle connection")

// tlsHandshakeTimeout bounds the TLS handshake with an upstream, as
// net/http's DefaultTransport does.
const tlsHandshakeTimeout = 10 * time.Second

// upstreamConn is a connection to an upstream that knows what happened in
// its current exchange (a request written, its answer read), for the retry
// rule. fasthttp hands a connection to one request at a time, through its
// pool's lock, so the exchange fields need no lock of their own.
type upstreamConn struct {
	net.Conn          // what fasthttp reads and writes: the TLS session or the TCP connection
	tcp      net.Conn // the TCP connection, looked at between exchanges
	// exchanges counts the exchanges begun; from the second, the
	// connection is a reused one.
	exchanges int
	reading   bool  // the current exchange has begun reading its answer
	written   int64 // request bytes written in the current exchange
	read      int64 // answer bytes read in the current exchange
	// idle looks at tcp before a reused connection is written on, made at
	// the first reuse (idleMade): nil when tcp is no socket.
	idle     *idlePeek
	idleMade bool
	// peek is tlsUnread's one-byte read, kept here: a local would be
	// allocated at each reuse.
	peek [1]byte
	// switched: the upstream answered 101 Switching Protocols on this
	// connection; it is refused like a closed idle one. Set by Read, from
	// the answer's first bytes, before fasthttp parses the answer and pools
	// the connection (set later, a request could take the pooled
	// connection in between and read what the upstream sends next as its
	// answer); retryTransport sets it too, for a 101 after an interim 1xx.
	// Atomic: retryTransport's store comes after the pooling.
	switched atomic.Bool
	// head holds an exchange's first answer bytes, for Read's 101 check.
	head [len("HTTP/1.1 101")]byte
	// answerHead holds an exchange's first answer bytes, up to
	// UpstreamReadBufferSize (which bounds the status line and header
	// fields fasthttp reads), for the Content-Encoding lines fasthttp's
	// parser keeps only the last of (joinedCodings). Reused across
	// exchanges.
	answerHead []byte
	// addr is LocalAddr's answer, made once: fasthttp asks for it on every
	// answer (Response.ParseNetConn).
	addr net.Addr
}

// Write begins a new exchange when the last one was reading, and then
// refuses to write on a reused connection the upstream has closed.
func (c *upstreamConn) Write(p []byte) (int, error) {
	if c.reading || c.exchanges == 0 {
		c.exchanges++
		c.reading, c.written, c.read = false, 0, 0
		c.answerHead = c.answerHead[:0]
		if c.exchanges > 1 {
			if !c.idleMade {
				c.idle, c.idleMade = newIdlePeek(c.tcp), true
			}
			if c.switched.Load() {
				return 0, errIdleClosed
			}
			if unusable, _ := c.idle.unusable(); unusable {
				return 0, errIdleClosed
			}
			if tc, ok := c.Conn.(*tls.Conn); ok && tlsUnread(tc, c.peek[:]) {
				return 0, errIdleClosed
			}
		}
	}
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	return n, err
}

func (c *upstreamConn) Read(p []byte) (int, error) {
	c.reading = true
	n, err := c.Conn.Read(p)
	if c.read < int64(len(c.head)) {
		k := copy(c.head[c.read:], p[:n])
		if int(c.read)+k == len(c.head) && switching(c.head[:]) {
			c.switched.Store(true)
		}
	}
	if room := UpstreamReadBufferSize - len(c.answerHead); room > 0 && n > 0 {
		c.answerHead = append(c.answerHead, p[:min(n, room)]...)
	}
	c.read += int64(n)
	return n, err
}

// joinedCodings returns the Content-Encoding field lines of the final
// answer head in head (an exchange's first bytes: interim 1xx heads
// skipped) joined as one comma list, when there are two or more: RFC 9110
// §5.3 makes several lines of a list field one list in order, and
// fasthttp's parser keeps only the last (a CDN adding "br" after its
// server's "gzip" line left llmguard decoding br alone, the usage unread).
// Lines end in CRLF or a bare LF (fasthttp refuses an answer head of bare
// LFs today, as unreachable; should it take one, its list is still
// joined). ok is false for one line or none, and for a head not seen
// whole.
func joinedCodings(head []byte) (joined string, ok bool) {
	for {
		var vals []string
		interim, first := false, true
		for {
			i := bytes.IndexByte(head, '\n')
			if i < 0 {
				return "", false // not seen whole
			}
			line := bytes.TrimSuffix(head[:i], []byte("\r"))
			head = head[i+1:]
			if first {
				first = false
				interim = len(line) >= 12 && string(line[:7]) == "HTTP/1." && line[9] == '1'
				continue
			}
			if len(line) == 0 {
				break // the head's end
			}
			name, value, found := bytes.Cut(line, []byte(":"))
			if found && bytes.EqualFold(bytes.TrimSpace(name), []byte(fasthttp.HeaderContentEncoding)) {
				vals = append(vals, string(bytes.TrimSpace(value)))
			}
		}
		if interim {
			continue // an interim answer: the final one follows
		}
		if len(vals) < 2 {
			return "", false
		}
		return strings.Join(vals, ", "), true
	}
}

// tlsUnread reports whether the TLS session tc, between two exchanges,
// holds what nobody asked for: a record read from the socket along with the
// last answer's end (a tail past its Content-Length or its last chunk, a
// close_notify), or anything its read fails on but a timeout. The socket
// look (idlePeek) cannot see such a record: it was read from the socket
// already, and the next request written would read it as its answer
// (another call's bytes and usage). It reads with a deadline already past,
// which the TLS session serves from what it holds, else fails with a
// timeout that leaves the session usable (crypto/tls keeps no error for a
// temporary one), then clears the deadline (fasthttp sets its own after
// writing). A byte read means the connection is done with. A record only
// part of which has arrived is not seen (its read waits for the rest): an
// upstream would have to split a record on purpose to be read so. b, of
// length 1, is the read's buffer. It allocates once, the net package's
// error for the timeout (BenchmarkTLSUnread).
func tlsUnread(tc *tls.Conn, b []byte) bool {
	if tc.SetReadDeadline(longAgo) != nil {
		return true
	}
	n, err := tc.Read(b)
	if tc.SetReadDeadline(time.Time{}) != nil {
		return true
	}
	return n > 0 || !errors.Is(err, os.ErrDeadlineExceeded)
}

// longAgo is a deadline already past (net/http's aLongTimeAgo).
var longAgo = time.Unix(1, 0)

// switching reports whether head, an answer's first bytes, is the status
// line of a 101 Switching Protocols ("HTTP/1.x 101").
func switching(head []byte) bool {
	return len(head) >= 12 && string(head[:7]) == "HTTP/1." && head[8] == ' ' && string(head[9:12]) == "101"
}

// Handshake tells fasthttp that an https upstream's connection is a TLS
// session already (dialUpstream made it), so that it does not wrap it again.
func (c *upstreamConn) Handshake() error {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.Handshake()
	}
	return nil
}

// LocalAddr is the TCP connection's, carrying the connection along:
// fasthttp keeps it on the response of each attempt (Response.LocalAddr),
// which is how retryTransport finds the connection an attempt failed on.
func (c *upstreamConn) LocalAddr() net.Addr {
	if c.addr == nil {
		c.addr = connAddr{Addr: c.Conn.LocalAddr(), conn: c}
	}
	return c.addr
}

// connAddr is an upstreamConn's local address; it prints as the address.
type connAddr struct {
	net.Addr
	conn *upstreamConn
}

// retryable reports whether the request req that failed with err on c may
// be sent again on a fresh connection (the rule above).
func (c *upstreamConn) retryable(req *fasthttp.Request, err error) bool {
	switch {
	case c.exchanges < 2, errors.Is(err, fasthttp.ErrTimeout):
		return false
	case c.written == 0:
		return true
	default:
		return c.read == 0 && replayable(req)
	}
}

// replayable reports whether req may be repeated after the upstream may
// have seen it: a GET, HEAD, OPTIONS or TRACE. Unlike net/http, a request
// carrying an Idempotency-Key is not: the caller's key promises nothing
// about the upstream's billing, and a POST the upstream read and billed
// would be paid twice while llmguard charges it once.
func replayable(req *fasthttp.Request) bool {
	switch string(req.Header.Method()) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodOptions, fasthttp.MethodTrace:
		return true
	}
	return false
}

// retryTransport is fasthttp's transport with the retry rule above: it
// lets HostClient retry (MaxIdemponentCallAttempts 2: once) only a
// retryable failure, and drops the pool's idle connections first, so that
// the retry dials a fresh one: an upstream that closed one idle connection
// (a restart, a drain) has usually closed its siblings too.
type retryTransport struct{}

// RoundTrip sends req. A body sent as a sentBody is a stream to fasthttp, which retries no
// stream (and forgets it once written): RoundTrip retries it itself, by
// the same rule and as often (once), unless its client has left.
func (t retryTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	sb, _ := req.BodyStream().(*sentBody)
	retry, err := t.attempt(hc, req, resp)
	if sb == nil || !retry {
		return retry, err
	}
	if sb.left.Load() {
		return false, err
	}
	sb.rewind()
	req.SetBodyStream(sb, len(sb.b))
	_, err = t.attempt(hc, req, resp)
	return false, err
}

// attempt is one try of RoundTrip: whether it may be retried, and its
// error.
func (retryTransport) attempt(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	_, err := fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	if err == nil {
		// Several lines leave fasthttp the last, so an answer with none
		// has nothing to join: its head is not read again.
		if a, ok := resp.LocalAddr().(connAddr); ok && len(resp.Header.ContentEncoding()) > 0 {
			if codings, ok := joinedCodings(a.conn.answerHead); ok {
				resp.Header.SetContentEncoding(codings) // every line, in order
			}
		}
		if resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
			// The connection now speaks whatever the upstream switched
			// to, yet fasthttp pooled it (a 101 has no body to hold it
			// by): mark it, so that the next request refuses it before
			// writing (and is sent on a fresh connection), and no request
			// reads what the upstream sends next as its answer. relay
			// refuses the 101 itself.
			if a, ok := resp.LocalAddr().(connAddr); ok {
				a.conn.switched.Store(true)
			}
		}
		return false, nil
	}
	a, ok := resp.LocalAddr().(connAddr)
	if !ok || !a.conn.retryable(req, err) {
		return false, err
	}
	hc.CloseIdleConnections()
	return true, err
}

// retryOnce lets HostClient retry whatever retryTransport marked
// retryable.
func retryOnce(*fasthttp.Request, int, error) (resetTimeout, retry bool) { return false, true }

// dialUpstream dials addr (and for https, makes the TLS session with
// cfg) and returns an upstreamConn.
func dialUpstream(addr string, timeout time.Duration, useTLS bool, cfg *tls.Config) (net.Conn, error) {
	c, err := dial(addr, timeout, useTLS, cfg)
	if err != nil {
		return nil, dialError{err}
	}
	return c, nil
}

// dialError is a failure to connect to an upstream (TCP or TLS): no byte
// of the request can have reached it.
type dialError struct{ err error }

func (e dialError) Error() string { return "proxy: dial upstream: " + e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// unsent reports whether err, an upstream call's failure, means no byte of
// the request reached the upstream — so the upstream cannot have started,
// nor billed, the call: a failed dial or TLS handshake, no free connection
// within MaxConnWaitTimeout, or a reused connection found closed before
// writing. Any other failure (a timeout, a connection cut after the request
// was written) may have been billed.
func unsent(err error) bool {
	var de dialError
	return errors.As(err, &de) || errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) ||
		errors.Is(err, errIdleClosed)
}

func dial(addr string, timeout time.Duration, useTLS bool, cfg *tls.Config) (net.Conn, error) {
	var tcp net.Conn
	var err error
	if timeout > 0 {
		tcp, err = fasthttp.DialTimeout(addr, timeout)
	} else {
		tcp, err = fasthttp.Dial(addr)
	}
	if err != nil {
		return nil, err
	}
	c := &upstreamConn{Conn: tcp, tcp: tcp}
	c.addr = connAddr{Addr: tcp.LocalAddr(), conn: c} // a TLS session's local address is its socket's
	if useTLS {
		tc := tls.Client(tcp, cfg)
		if err := tcp.SetDeadline(time.Now().Add(tlsHandshakeTimeout)); err != nil {
			tcp.Close()
			return nil, err
		}
		if err := tc.Handshake(); err != nil {
			tcp.Close()
			return nil, err
		}
		if err := tcp.SetDeadline(time.Time{}); err != nil {
			tcp.Close()
			return nil, err
		}
		c.Conn = tc
	}
	return c, nil
}
