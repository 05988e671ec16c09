package mockllm

import (
	"bufio"
	"compress/gzip"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// sse writes the events of one streamed answer with the line ending and
// compression the request asked for. A failed write is sticky: every later
// write is skipped and reports false. Not safe for concurrent use.
type sse struct {
	out    io.Writer    // gz, or bw when not gzipped
	gz     *gzip.Writer // nil unless x-mock-gzip
	flush  func() error // pushes everything written so far to the client
	eol    string
	delay  time.Duration
	failed bool
}

// event writes one SSE event — an "event:" line when name is not empty, and
// one "data:" line — and flushes it. It reports false when the client is
// gone.
func (o *sse) event(name, data string) bool {
	if o.failed {
		return false
	}
	if name != "" {
		io.WriteString(o.out, "event: "+name+o.eol)
	}
	io.WriteString(o.out, "data: "+data+o.eol+o.eol)
	return o.push()
}

// push flushes the gzip writer (a sync flush) and the connection.
func (o *sse) push() bool {
	if o.failed {
		return false
	}
	if o.gz != nil && o.gz.Flush() != nil {
		o.failed = true
		return false
	}
	if o.flush() != nil {
		o.failed = true
	}
	return !o.failed
}

// pause waits x-mock-delay-ms before a content delta.
func (o *sse) pause() {
	if o.delay > 0 {
		time.Sleep(o.delay)
	}
}

// end is how a stream's writer finished.
type end uint8

const (
	endCompleted end = iota // the terminal event was written
	endAborted              // a write failed: the client went away
	endErrored              // an in-band error was written (x-mock-stream-error)
	endCut                  // stop here and drop the connection (x-mock-stream-cut)
)

// stopAt is where a stream of n content deltas stops early, and how: after
// min(K, n) deltas with an in-band error or a cut; ok false when it runs to
// the end.
func (st steer) stopAt(n int) (k int, how end, ok bool) {
	switch {
	case st.cutAfter >= 0:
		return min(st.cutAfter, n), endCut, true
	case st.errAfter >= 0:
		return min(st.errAfter, n), endErrored, true
	}
	return 0, endCompleted, false
}

// stream answers ctx with an SSE body written by write, after the handler
// returns, and counts how it ended. write must not use ctx. When the request
// asked for a cut the connection is hijacked and the HTTP response written by
// hand, so it can end without the chunked terminator.
func (s *Server) stream(ctx *fasthttp.RequestCtx, st steer, write func(o *sse) end) {
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	if st.gzip {
		ctx.Response.Header.Set("Content-Encoding", "gzip")
	}
	if st.cutAfter >= 0 {
		s.streamCut(ctx, st, write)
		return
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		o := newSSE(w, w.Flush, st)
		s.count(o, write(o))
	})
}

func newSSE(w io.Writer, flush func() error, st steer) *sse {
	o := &sse{out: w, flush: flush, eol: "\n", delay: st.delay}
	if st.crlf {
		o.eol = "\r\n"
	}
	if st.gzip {
		o.gz = gzip.NewWriter(w)
		o.out = o.gz
	}
	return o
}

// count finishes a stream that was not cut and counts how it ended.
func (s *Server) count(o *sse, e end) {
	if e != endAborted && o.gz != nil && !o.failed {
		if o.gz.Close() != nil || o.flush() != nil {
			o.failed = true
		}
	}
	switch {
	case e == endAborted || o.failed:
		s.StreamsAborted.Add(1)
	case e == endErrored:
		s.StreamsErrored.Add(1)
	case e == endCompleted:
		s.StreamsCompleted.Add(1)
	}
}

// streamCut serves a stream that ends with the connection closed abruptly.
func (s *Server) streamCut(ctx *fasthttp.RequestCtx, st steer, write func(o *sse) end) {
	head := "HTTP/1.1 200 OK\r\nDate: " + string(fasthttp.AppendHTTPDate(nil, time.Now())) + "\r\n"
	ctx.Response.Header.VisitAll(func(k, v []byte) { // Server and Content-Type included
		head += string(k) + ": " + string(v) + "\r\n"
	})
	head += "Transfer-Encoding: chunked\r\n\r\n"
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		conn := bufio.NewWriter(c)
		conn.WriteString(head)
		body := bufio.NewWriterSize(chunked{conn}, 4096)
		o := newSSE(body, func() error {
			if err := body.Flush(); err != nil {
				return err
			}
			return conn.Flush()
		}, st)
		if o.push() { // the head, even before the first event
			if e := write(o); e == endCut && !o.failed {
				s.StreamsCut.Add(1)
				return // closing c drops the connection mid-body
			}
		}
		s.StreamsAborted.Add(1)
	})
}

// chunked frames every Write as one HTTP/1.1 chunk.
type chunked struct{ w *bufio.Writer }

func (c chunked) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.w.WriteString(strconv.FormatInt(int64(len(p)), 16) + "\r\n")
	c.w.Write(p)
	_, err := c.w.WriteString("\r\n")
	return len(p), err
}
