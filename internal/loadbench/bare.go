package loadbench

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/bufpool"
)

// bareProxy is the floor the benchmark compares llmguard with: a fasthttp
// reverse proxy that forwards every request to one upstream as llmguard's
// proxy package does (proxy.Proxy.forward and relay) and does nothing else
// — no identification, weighing, limiting, usage tap or metrics. Its
// server and upstream client carry llmguard's settings (internal/app's
// fasthttp.Server, proxy.Upstream.init's HostClient), it reads the body
// itself into a buffer of its Content-Length taken from a pool of buffers
// reused between requests (proxy.readBody, internal/bufpool), drops the
// hop-by-hop fields both ways, asks the upstream for an identity encoding,
// relays an SSE answer read by read with a flush after each (16 KiB
// buffer), and reads any other answer whole before sending it.
type bareProxy struct {
	client  *fasthttp.HostClient
	host    string // upstream host:port
	prefix  string // scheme://host[/path] the request URI is appended to
	timeout time.Duration
	bodies  *bufpool.Pool // as llmguard's body pool (proxy/body.go), 32 MiB
}

// newBareProxy returns the bare proxy of the upstream at baseURL
// (http://host:port). Errors: baseURL does not parse.
func newBareProxy(baseURL string) (*bareProxy, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	p := &bareProxy{host: u.Host, prefix: "http://" + u.Host + u.Path, timeout: 10 * time.Minute, bodies: bufpool.New(32 << 20)}
	p.client = &fasthttp.HostClient{
		Addr:                          u.Host,
		Name:                          "bare",
		MaxConns:                      1024,
		MaxIdleConnDuration:           4 * time.Second,
		ReadTimeout:                   p.timeout,
		WriteTimeout:                  30 * time.Second,
		MaxConnWaitTimeout:            5 * time.Second,
		StreamResponseBody:            true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
	}
	return p, nil
}

// server is the fasthttp server llmguard runs, serving p.
func (p *bareProxy) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      p.handle,
		Name:                         "bare",
		NoDefaultServerHeader:        true,
		MaxRequestBodySize:           8 << 20,
		ReadTimeout:                  60 * time.Second,
		IdleTimeout:                  120 * time.Second,
		ReadBufferSize:               16 << 10,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		LazyRequestTime:              true, // as llmguard's (internal/app): no clock read before each request
	}
}

func (p *bareProxy) handle(ctx *fasthttp.RequestCtx) {
	body, pooled, ok := p.readWhole(ctx)
	defer p.bodies.Put(pooled) // after the upstream request is released (deferred below)
	if !ok {
		ctx.Error("bad body", fasthttp.StatusBadRequest)
		return
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	ctx.Request.Header.CopyTo(&req.Header)
	dropHopFields(&req.Header)
	req.Header.Set("X-Forwarded-For", ctx.RemoteIP().String())
	req.Header.Set("Accept-Encoding", "identity")
	req.SetRequestURI(p.prefix + string(ctx.RequestURI()))
	req.Header.SetHost(p.host)
	req.SetBodyRaw(body)

	resp := fasthttp.AcquireResponse()
	if err := p.client.DoTimeout(req, resp, p.timeout); err != nil {
		fasthttp.ReleaseResponse(resp)
		ctx.Error("upstream unreachable", fasthttp.StatusBadGateway)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	dropHopFields(&ctx.Response.Header)
	if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) && resp.BodyStream() != nil {
		ctx.Response.Header.SetContentLength(-1)
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { relayStream(w, resp) })
		return
	}
	defer fasthttp.ReleaseResponse(resp)
	st := resp.BodyStream()
	if st == nil {
		ctx.Response.SetBody(resp.Body())
		return
	}
	b, err := io.ReadAll(st)
	resp.CloseBodyStream()
	if err != nil {
		ctx.Response.Header.Del("Content-Encoding")
		ctx.Error("upstream body lost", fasthttp.StatusBadGateway)
		return
	}
	ctx.Response.SetBodyRaw(b)
}

// relayStream copies an SSE body to the client, flushing after every read,
// and releases resp.
func relayStream(w *bufio.Writer, resp *fasthttp.Response) {
	defer fasthttp.ReleaseResponse(resp)
	src := resp.BodyStream()
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || w.Flush() != nil {
				if rc, ok := src.(fasthttp.ReadCloserWithError); ok {
					rc.CloseWithError(werr)
				}
				return
			}
		}
		if err != nil {
			break
		}
	}
	resp.CloseBodyStream()
}

// readWhole reads the request body into a buffer of its Content-Length
// from the body pool (pooled: to give back when done), as llmguard does, or
// whole when it is chunked or fasthttp read it already.
func (p *bareProxy) readWhole(ctx *fasthttp.RequestCtx) (body, pooled []byte, ok bool) {
	st := ctx.RequestBodyStream()
	if st == nil {
		return ctx.Request.Body(), nil, true
	}
	if cl := ctx.Request.Header.ContentLength(); cl >= 0 {
		b := p.bodies.Get(cl)
		_, err := io.ReadFull(st, b)
		return b, b, err == nil
	}
	b, err := io.ReadAll(st)
	return b, nil, err == nil
}

// hopFields are the hop-by-hop fields of RFC 9110 §7.6.1 (and the
// pre-standard Keep-Alive, Proxy-Connection). Unlike llmguard, the bare
// proxy does not also drop the fields a Connection field names: the
// benchmark's requests name none.
var hopFields = [][]byte{
	[]byte("Connection"), []byte("Proxy-Connection"), []byte("Keep-Alive"), []byte("Proxy-Authenticate"),
	[]byte("Proxy-Authorization"), []byte("Te"), []byte("Trailer"), []byte("Transfer-Encoding"), []byte("Upgrade"),
}

// hopLens has bit n set when a hop-by-hop field name is n bytes long.
var hopLens = func() (m uint64) {
	for _, f := range hopFields {
		m |= 1 << len(f)
	}
	return m
}()

// dropHopFields deletes the hop-by-hop fields in any case they are written.
// It walks the keys once, compares only a key of a hop-by-hop name's length
// (bytes.EqualFold), and deletes only the fields it found, as a careful
// bare proxy would: llmguard's removeFields does the same (by length, then
// the name), and a floor that compared every field with every name and
// deleted each name unconditionally (20 normalising Dels a request) spent
// some 10,000 instructions a request more than llmguard on the same job
// (whole-process callgrind, 1 KiB warm JSON c32, 2026-12-06), flattering
// llmguard's ratio to it.
func dropHopFields(h interface {
	PeekKeys() [][]byte
	Del(string)
}) {
	var buf [4]string
	drop := buf[:0]
	for _, k := range h.PeekKeys() {
		if len(k) >= 64 || hopLens&(1<<len(k)) == 0 {
			continue
		}
		for _, f := range hopFields {
			if len(f) == len(k) && bytes.EqualFold(k, f) {
				// The canonical name too: it clears what fasthttp
				// keeps beside the list (Connection: close's flag).
				drop = append(drop, string(k))
				if string(k) != string(f) {
					drop = append(drop, string(f))
				}
				break
			}
		}
	}
	for _, k := range drop {
		h.Del(k)
	}
}

// serveBare runs the bare proxy of upstream on ln until it fails.
func serveBare(ln net.Listener, upstream string) error {
	p, err := newBareProxy(upstream)
	if err != nil {
		return err
	}
	return p.server().Serve(ln)
}
