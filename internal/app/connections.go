package app

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/proxy"
)

// adminMaxConnections caps the admin listener's open connections: scrapes,
// health checks and the admin API need few, and each holds a file
// descriptor the proxy's upstream dials and Redis need too.
const adminMaxConnections = 256

// minDefaultConnections is the least default max_connections, whatever the
// file-descriptor limit: a limit so low that half of it is below this is a
// misconfigured host, and a proxy that refused its 65th caller would be
// worse than one that runs out of descriptors under attack.
const minDefaultConnections = config.MaxConnectionsFloor

// maxConnections is the proxy listener's connection cap (fasthttp's
// Server.Concurrency) for configured (config max_connections; 0: the
// default) under the file-descriptor limit files (0: unknown): configured
// when set, else half of files (at least minDefaultConnections, at most
// maxDefaultConnections), else
// fasthttp's own default (256 × 1024). A configured cap at or above the
// limit is kept, and logged: connections could then use up the
// descriptors the upstream dials need.
func maxConnections(configured int, files uint64, log *slog.Logger) int {
	if configured > 0 {
		if files > 0 && uint64(configured) >= files {
			log.Warn("max_connections is not below the file-descriptor limit: connections that send half a request can use up the descriptors upstream dials and Redis need",
				"max_connections", configured, "file_limit", files)
		}
		return configured
	}
	if files == 0 {
		return fasthttp.DefaultConcurrency
	}
	return int(min(max(files/2, minDefaultConnections), maxDefaultConnections))
}

// maxDefaultConnections caps the default max_connections whatever the
// file-descriptor limit: each connection holds its read buffer
// (proxy.ReadBufferSize, 16 KiB) while it sends its request, so half of a
// container's usual limit of 1,048,576 descriptors would let half-sent
// requests hold some 8 GiB; 65,536 hold about 1 GiB.
const maxDefaultConnections = config.MaxConnectionsCeiling

// connCap counts the proxy listener's open caller connections and refuses
// those past max with its own 503 (capped.refuse), where fasthttp's
// Server.Concurrency answered a text/plain "Server.Concurrency limit
// exceeded" that named no setting, carried no Retry-After and was logged
// nowhere. The zero value is not usable: make one with newConnCap. Safe for
// concurrent use.
type connCap struct {
	max      int64
	open     atomic.Int64
	refused  atomic.Uint64
	log      *slog.Logger
	loggedAt atomic.Int64 // Unix nanoseconds of the last refusal logged
	// tls: the listener's connections speak TLS, so a refused one is
	// closed without an answer (writing one would wait for its handshake).
	tls bool
}

// newConnCap caps connections at limit (at least 1).
func newConnCap(limit int, tls bool, log *slog.Logger) *connCap {
	return &connCap{max: int64(max(1, limit)), tls: tls, log: log}
}

// connCapRetryAfter is the Retry-After of a refused connection, in seconds:
// connections free up as requests end, so a client may try again soon.
const connCapRetryAfter = 1

// refusedAnswer is the whole answer to a connection past the cap: 503 in a
// body both SDK shapes read (OpenAI's error.message and error.code,
// Anthropic's type "error" and error.type overloaded_error), Retry-After,
// and Connection: close.
func refusedAnswer(max int64) []byte {
	body := `{"type":"error","error":{"type":"overloaded_error","code":"max_connections","message":"llmguard is holding its most open connections (max_connections ` +
		strconv.FormatInt(max, 10) + `): retry shortly, or reuse fewer connections (keep-alive pools)."}}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " + strconv.Itoa(connCapRetryAfter) +
		"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// listen wraps ln: Accept returns connections while fewer than max are
// open, and answers and closes the others itself.
func (c *connCap) listen(ln net.Listener) net.Listener {
	return &cappedListener{Listener: ln, c: c, answer: refusedAnswer(c.max)}
}

type cappedListener struct {
	net.Listener
	c      *connCap
	answer []byte
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.c.open.Add(1) <= l.c.max {
			return &cappedConn{Conn: conn, c: l.c}, nil
		}
		l.c.open.Add(-1)
		l.c.refuse(conn, l.answer)
	}
}

// refuse answers conn (unless TLS) and closes it, counts it, and logs at
// most one line every 10 s. The answer fits a new socket's send buffer, so
// the write does not wait; a deadline bounds it all the same.
func (c *connCap) refuse(conn net.Conn, answer []byte) {
	c.refused.Add(1)
	if !c.tls {
		conn.SetWriteDeadline(time.Now().Add(time.Second))
		conn.Write(answer)
	}
	conn.Close()
	now := time.Now().UnixNano()
	if last := c.loggedAt.Load(); now-last >= int64(10*time.Second) && c.loggedAt.CompareAndSwap(last, now) {
		c.log.Warn("max_connections reached: new caller connections are answered 503 and closed",
			"max_connections", c.max, "refused_total", c.refused.Load())
	}
}

var _ proxy.SocketConn = (*cappedConn)(nil)

// cappedConn gives its place back once, when closed.
type cappedConn struct {
	net.Conn
	c      *connCap
	closed atomic.Bool
}

func (c *cappedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.c.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite shuts the writing side of the socket underneath (a lingering
// close, proxy's writeTimeoutConn), or closes it when there is none.
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// Socket gives the TCP socket underneath, to which Write hands its bytes
// unchanged (proxy.SocketConn: the client write deadline's first try).
func (c *cappedConn) Socket() *net.TCPConn { return proxy.SocketOf(c.Conn) }

// SyscallConn gives the socket underneath, for the proxy's look at a
// departed client (peerClosed).
func (c *cappedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("app: connection has no socket")
	}
	return sc.SyscallConn()
}

// connectionMetrics are the proxy listener's open connections, its cap and
// the connections it refused, read from c when scraped.
func connectionMetrics(c *connCap) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmguard_open_connections",
			Help: "Caller connections the proxy listener holds open, idle keep-alive ones included.",
		}, func() float64 { return float64(max(c.open.Load(), 0)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmguard_max_connections",
			Help: "The proxy listener's connection cap (max_connections, or half the file-descriptor limit).",
		}, func() float64 { return float64(c.max) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmguard_connections_refused_total",
			Help: "Caller connections answered 503 and closed because max_connections were open.",
		}, func() float64 { return float64(c.refused.Load()) }),
	}
}
