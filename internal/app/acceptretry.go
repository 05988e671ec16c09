package app

import (
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// acceptBackoffMax is the longest an acceptRetryListener waits between two
// accepts that found the process out of a resource, as net/http's server
// waits (5 ms, doubling, at most 1 s).
const acceptBackoffMax = time.Second

// acceptLogEvery is the least time between two log lines of one
// acceptRetryListener.
const acceptLogEvery = 10 * time.Second

// acceptRetryListener is a listener whose Accept waits and tries again
// when accepting failed for want of a resource (file descriptors, kernel
// buffers or memory: EMFILE, ENFILE, ENOBUFS, ENOMEM) or because the peer
// left before it was accepted (ECONNABORTED), instead of returning the
// error. fasthttp's Server.Serve returns on any accept error that is not a
// timeout, so a burst of connections that used up the process's file
// descriptors (connections that send half a request each hold one for the
// read timeout, 60 s) stopped the proxy listener for good, while the admin
// listener kept answering /healthz. Any other error (the listener closed)
// is returned as it is. Safe for concurrent use, as the listener it wraps.
type acceptRetryListener struct {
	net.Listener
	log     *slog.Logger
	name    string       // which listener, for the log
	lastLog atomic.Int64 // Unix nanoseconds of the last log line
}

// acceptRetry wraps ln (see acceptRetryListener); name says which listener
// it is in the log.
func acceptRetry(ln net.Listener, log *slog.Logger, name string) net.Listener {
	return &acceptRetryListener{Listener: ln, log: log, name: name}
}

// Accept returns the next connection, waiting out resource exhaustion
// (5 ms, doubling up to acceptBackoffMax between tries). Errors: those of
// the wrapped listener other than resource exhaustion.
func (l *acceptRetryListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || !resourceExhausted(err) {
			return c, err
		}
		delay = min(max(2*delay, 5*time.Millisecond), acceptBackoffMax)
		if now := time.Now().UnixNano(); now-l.lastLog.Load() >= int64(acceptLogEvery) {
			l.lastLog.Store(now)
			l.log.Warn("accept failed: retrying", "listener", l.name, "err", err, "retry_in", delay, "next_line_after", acceptLogEvery)
		}
		time.Sleep(delay)
	}
}

// resourceExhausted reports whether an accept error is one that passes:
// the process or the system out of file descriptors, buffers or memory, or
// a connection aborted before it was accepted.
func resourceExhausted(err error) bool {
	for _, e := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
