package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// The proxy-path benchmarks measure llmguard's own server path alone:
// Handle is called with a RequestCtx (its body streamed, as the production
// server's StreamRequestBody gives it) and the answer written to a discarding
// writer, against an upstream that is a canned byte sequence behind a fake
// connection, so neither a client nor a mock server allocates in the same
// process. The "transport" sub-benchmark is the floor: the same request
// forwarded by a bare fasthttp HostClient over the same fake connection and
// its answer written the same way, with nothing of llmguard in between.
//
//	go test -run XXX -bench ProxyPath -benchmem ./proxy

// pathBody is a chat request of about 1 KiB.
var pathBody = func() []byte {
	para := strings.Repeat("The token bucket refills at a steady rate and admits a burst up to its capacity. ", 11)
	return []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		para + `"}],"max_tokens":64}`)
}()

// pathStreamBody is pathBody asking for a stream.
var pathStreamBody = bytes.Replace(pathBody, []byte(`"max_tokens":64`), []byte(`"max_tokens":64,"stream":true`), 1)

// cannedJSON is a chat completion answer with usage, as OpenAI sends it.
var cannedJSON = func() []byte {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A bucket refills at a rate and admits bursts up to its size."},"finish_reason":"stop"}],"usage":{"prompt_tokens":230,"completion_tokens":14,"total_tokens":244}}`
	return []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
}()

// cannedSSE is a chat stream of 20 content chunks, the finish chunk, the
// include_usage chunk and [DONE], chunked as OpenAI sends it.
var cannedSSE = func() []byte {
	var events strings.Builder
	chunk := func(choices, usage string) {
		fmt.Fprintf(&events, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":%s,\"usage\":%s}\n\n", choices, usage)
	}
	for i := 0; i < 20; i++ {
		chunk(`[{"index":0,"delta":{"content":" word`+fmt.Sprint(i)+`"},"finish_reason":null}]`, "null")
	}
	chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`, "null")
	chunk(`[]`, `{"prompt_tokens":230,"completion_tokens":20,"total_tokens":250}`)
	events.WriteString("data: [DONE]\n\n")
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	s := events.String()
	for len(s) > 0 { // chunks of at most 512 bytes, as a server flushing events would
		n := min(len(s), 512)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, s[:n])
		s = s[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}()

// cannedConn is an upstream connection that answers every request written
// to it with the same bytes, allocating nothing.
type cannedConn struct {
	resp []byte
	off  int // bytes of the current answer read; len(resp) between answers
}

func newCannedConn(resp []byte) *cannedConn { return &cannedConn{resp: resp, off: len(resp)} }

func (c *cannedConn) Write(p []byte) (int, error) {
	if c.off == len(c.resp) { // a new request: owe a new answer
		c.off = 0
	}
	return len(p), nil
}

func (c *cannedConn) Read(p []byte) (int, error) {
	if c.off == len(c.resp) {
		return 0, io.EOF
	}
	n := copy(p, c.resp[c.off:])
	c.off += n
	return n, nil
}

func (c *cannedConn) Close() error                     { return nil }
func (c *cannedConn) LocalAddr() net.Addr              { return benchAddr }
func (c *cannedConn) RemoteAddr() net.Addr             { return benchAddr }
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }

var benchAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}

// pathRig is a Proxy in front of a canned upstream, as BenchmarkLoad
// configures it: three rules (user tokens, tenant usd, global requests) on
// a memory store, metrics on, ledger off.
func newPathRig(b testing.TB, answer []byte, with ...func(*Options)) *Proxy {
	b.Helper()
	cfg, err := config.Parse([]byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:4000", no_key: true}]
keys: [{key: sk-bench, user: alice, tenant: acme}]
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1000000000, per: 1s}
  - {name: tenant-usd, scope: tenant, unit: usd, rate: 1000000000, per: 1s}
  - {name: global-rps, scope: global, unit: requests, rate: 1000000000, per: 1s}
`))
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.Compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	store := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: -1})
	m, err := meter.NewMetrics(prometheus.NewRegistry(), meter.MetricsOptions{})
	if err != nil {
		b.Fatal(err)
	}
	up := &Upstream{Name: "mock", Flavor: FlavorOpenAI, BaseURL: "http://127.0.0.1:4000", Timeout: 10 * time.Second, MaxConns: 1}
	opt := Options{Upstreams: []*Upstream{up}, Policy: pol, Store: store, Weigher: benchWeigher(b), Metrics: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range with {
		f(&opt)
	}
	px, err := New(opt)
	if err != nil {
		b.Fatal(err)
	}
	conn := newCannedConn(answer)
	up.client.DialTimeout = func(string, time.Duration) (net.Conn, error) { return conn, nil }
	return px
}

// benchWeigher is the package's shared test Weigher (see testWeigher).
func benchWeigher(b testing.TB) *weigher.Weigher {
	b.Helper()
	sharedWeigher.once.Do(func() { sharedWeigher.w, sharedWeigher.err = weigher.New(weigher.Options{DefaultMaxOutputTokens: 256}) })
	if sharedWeigher.err != nil {
		b.Fatal(sharedWeigher.err)
	}
	return sharedWeigher.w
}

// pathRequest is a RequestCtx carrying body as a streamed request body,
// reused by every iteration.
type pathRequest struct {
	ctx  fasthttp.RequestCtx
	body *bytes.Reader
	raw  []byte
	w    *bufio.Writer
	out  countingWriter
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func newPathRequest(body []byte) *pathRequest {
	r := &pathRequest{body: bytes.NewReader(body), raw: body}
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://llmguard/v1/chat/completions")
	req.Header.Set("Authorization", "Bearer sk-bench")
	req.Header.SetContentType("application/json")
	r.ctx.Init(&req, benchAddr, nil)
	r.w = bufio.NewWriterSize(&r.out, 4096)
	return r
}

// serve runs one request through h and writes its answer; it returns the
// answer's status.
func (r *pathRequest) serve(b testing.TB, h fasthttp.RequestHandler) int {
	r.body.Reset(r.raw)
	r.ctx.Request.SetBodyStream(r.body, len(r.raw))
	r.ctx.Response.Reset()
	h(&r.ctx)
	if err := r.ctx.Response.Write(r.w); err != nil {
		b.Fatal(err)
	}
	if err := r.w.Flush(); err != nil {
		b.Fatal(err)
	}
	st := r.ctx.Response.StatusCode()
	// As the server does once the answer is written (Request.Reset): close
	// the request's user values, which gives the held answer back.
	r.ctx.Request.ResetUserValues()
	return st
}

func benchmarkPath(b *testing.B, answer, body []byte) {
	b.Run("transport", func(b *testing.B) {
		// The floor: forward as a bare reverse proxy would and write the
		// answer (streamed when the upstream streams).
		conn := newCannedConn(answer)
		hc := &fasthttp.HostClient{Addr: "127.0.0.1:4000", StreamResponseBody: true, MaxConns: 1,
			DialTimeout: func(string, time.Duration) (net.Conn, error) { return conn, nil }}
		h := func(ctx *fasthttp.RequestCtx) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			body, _ := io.ReadAll(io.LimitReader(ctx.RequestBodyStream(), int64(len(pathBody))+1024))
			ctx.Request.Header.CopyTo(&req.Header)
			req.SetRequestURI("http://127.0.0.1:4000/v1/chat/completions")
			req.SetBodyRaw(body)
			if err := hc.DoTimeout(req, resp, 10*time.Second); err != nil {
				b.Fatal(err)
			}
			resp.Header.CopyTo(&ctx.Response.Header)
			ctx.Response.SetBodyStream(&upstreamBody{rest: resp.BodyStream(), resp: resp}, -1)
		}
		run(b, newPathRequest(body), h)
	})
	b.Run("llmguard", func(b *testing.B) {
		run(b, newPathRequest(body), newPathRig(b, answer).Handle)
	})
}

func run(b *testing.B, r *pathRequest, h fasthttp.RequestHandler) {
	for range 10 { // warm the pools and the keep-alive connection
		if st := r.serve(b, h); st != 200 {
			b.Fatalf("status %d: %s", st, r.ctx.Response.Body())
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if st := r.serve(b, h); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(r.out.n)/float64(b.N+10), "out-B/op")
}

// BenchmarkProxyPath is a ~1 KiB chat request answered with JSON.
func BenchmarkProxyPath(b *testing.B) { benchmarkPath(b, cannedJSON, pathBody) }

// BenchmarkProxyPathStream is the same request streamed: 23 SSE events,
// the usage chunk llmguard asked for stripped.
func BenchmarkProxyPathStream(b *testing.B) { benchmarkPath(b, cannedSSE, pathStreamBody) }

// cannedLongJSON is a chat completion answer of about 16 KiB of text with
// its usage last, as OpenAI sends it.
var cannedLongJSON = func() []byte {
	text := strings.Repeat(`A bucket refills at a rate and admits bursts up to its size.\n`, 256)
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","service_tier":"default","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":230,"completion_tokens":3328,"total_tokens":3558}}`
	return []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
}()

// BenchmarkProxyPathUnread is pathBody answered with cannedLongJSON over
// max_response_bytes (4 KiB), so relayed unread: its usage, service tier
// and text read as it passes (passingCount).
func BenchmarkProxyPathUnread(b *testing.B) {
	b.Run("llmguard", func(b *testing.B) {
		run(b, newPathRequest(pathBody), newPathRig(b, cannedLongJSON, func(o *Options) { o.MaxResponseBytes = 4 << 10 }).Handle)
	})
}
