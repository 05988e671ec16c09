package mockllm

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/weigher"
)

// Server is a running mock upstream. Safe for concurrent use.
type Server struct {
	// URL is the base URL to configure as an upstream, e.g. http://127.0.0.1:41234.
	URL string

	ln  net.Listener
	srv *fasthttp.Server
	w   *weigher.Weigher

	mu      sync.Mutex
	last    *fasthttp.RequestHeader
	lastRaw []byte

	// Requests counts requests served.
	Requests atomic.Int64
	// StreamsAborted counts streams whose client went away before the end.
	StreamsAborted atomic.Int64
	// StreamsCompleted counts streams written to the end (the flavor's
	// terminal event — [DONE], response.completed, message_stop — flushed).
	StreamsCompleted atomic.Int64
	// StreamsErrored counts streams ended by an in-band error
	// (x-mock-stream-error) that reached the client.
	StreamsErrored atomic.Int64
	// StreamsCut counts streams whose connection was closed abruptly
	// (x-mock-stream-cut).
	StreamsCut atomic.Int64
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves until Close.
// Errors: the address cannot be bound, or the weigher cannot start.
func Start(addr string) (*Server, error) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 16})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mockllm: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, w: w}
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "mockllm", MaxRequestBodySize: 64 << 20, StreamRequestBody: false}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Shutdown() }

// LastRequest returns a copy of the headers and body of the last request.
func (s *Server) LastRequest() (*fasthttp.RequestHeader, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := new(fasthttp.RequestHeader)
	if s.last != nil {
		s.last.CopyTo(h)
	}
	return h, append([]byte(nil), s.lastRaw...)
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	s.Requests.Add(1)
	s.mu.Lock()
	if s.last == nil {
		s.last = new(fasthttp.RequestHeader)
	}
	ctx.Request.Header.CopyTo(s.last)
	s.lastRaw = append(s.lastRaw[:0], ctx.Request.Body()...)
	s.mu.Unlock()

	path := string(ctx.Path())
	anthropic := path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
	if st := ctx.Request.Header.Peek("x-mock-status"); len(st) > 0 {
		code, _ := strconv.Atoi(string(st))
		if anthropic {
			anthropicError(ctx, code, anthropicErrorType(code), fmt.Sprintf("mock error %d", code))
			return
		}
		ctx.SetStatusCode(code)
		ctx.SetContentType("application/json")
		fmt.Fprintf(ctx, `{"error":{"message":"mock error %d","type":"server_error","param":null,"code":null}}`, code)
		return
	}
	switch path {
	case "/v1/models":
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`)
	case "/v1/chat/completions":
		s.chat(ctx)
	case "/v1/responses":
		s.responses(ctx)
	case "/v1/completions":
		s.completions(ctx)
	case "/v1/embeddings":
		s.embeddings(ctx)
	case "/v1/messages":
		s.messages(ctx)
	case "/v1/messages/count_tokens":
		s.countTokens(ctx)
	default:
		if anthropic {
			anthropicError(ctx, fasthttp.StatusNotFound, "not_found_error", "Not found")
			return
		}
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"unknown path","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	}
}

// badJSON answers 400 with OpenAI's error for a body that is not JSON.
func badJSON(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusBadRequest)
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
}

// anthropicError answers code with Anthropic's error body
// (https://docs.anthropic.com/en/api/errors).
func anthropicError(ctx *fasthttp.RequestCtx, code int, typ, msg string) {
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("request-id", newID("req_"))
	fmt.Fprintf(ctx, `{"type":"error","error":{"type":%s,"message":%s}}`, js(typ), js(msg))
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(code int) string {
	switch code {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// steer is what a request's x-mock-* headers ask for. The zero value asks
// for nothing; -1 in errAfter / cutAfter means "not asked".
type steer struct {
	completion    int64 // x-mock-completion-tokens, when hasCompletion
	hasCompletion bool
	reasoning     int64         // x-mock-reasoning-tokens
	cacheRead     int64         // x-mock-cache-read
	cacheWrite    int64         // x-mock-cache-write
	cacheWrite1h  int64         // x-mock-cache-write-1h, at most cacheWrite
	delay         time.Duration // x-mock-delay-ms, before each content delta
	noUsage       bool
	gzip          bool
	crlf          bool
	splitDelta    bool
	errorUsage    bool
	errAfter      int // x-mock-stream-error: after=K
	cutAfter      int // x-mock-stream-cut: K
}

func steerOf(h *fasthttp.RequestHeader) steer {
	num := func(name string) (int64, bool) {
		v := strings.TrimSpace(string(h.Peek(name)))
		if v == "" {
			return 0, false
		}
		n, _ := strconv.ParseInt(v, 10, 64) // garbage reads as 0
		return max(n, 0), true
	}
	set := func(name string) bool { return len(h.Peek(name)) > 0 }
	var st steer
	st.completion, st.hasCompletion = num("x-mock-completion-tokens")
	st.reasoning, _ = num("x-mock-reasoning-tokens")
	st.cacheRead, _ = num("x-mock-cache-read")
	st.cacheWrite, _ = num("x-mock-cache-write")
	h1, _ := num("x-mock-cache-write-1h")
	st.cacheWrite1h = min(h1, st.cacheWrite)
	d, _ := num("x-mock-delay-ms")
	st.delay = time.Duration(d) * time.Millisecond
	st.noUsage = set("x-mock-no-usage")
	st.gzip = set("x-mock-gzip")
	st.crlf = set("x-mock-sse-crlf")
	st.splitDelta = set("x-mock-split-delta")
	st.errorUsage = set("x-mock-error-usage")
	st.errAfter, st.cutAfter = -1, -1
	if v := strings.TrimSpace(string(h.Peek("x-mock-stream-error"))); v != "" {
		k, err := strconv.Atoi(strings.TrimPrefix(v, "after="))
		if err != nil || k < 0 {
			k = 0
		}
		st.errAfter = k
	}
	if k, ok := num("x-mock-stream-cut"); ok {
		st.cutAfter = int(min(k, 1<<30))
	}
	return st
}

// outputTokens is the reply size: x-mock-completion-tokens, else
// min(limit, 16).
func (st steer) outputTokens(limit int64) int64 {
	if st.hasCompletion {
		return st.completion
	}
	return max(min(limit, 16), 0)
}

// replyWords are the n words of a reply.
func replyWords(n int64) []string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[i%len(words)]
	}
	return parts
}

// words are single tokens in o200k_base and cl100k_base.
var words = []string{" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}

var idSeq atomic.Uint64

// newID is prefix plus a process-unique suffix.
func newID(prefix string) string {
	return prefix + "mock" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(idSeq.Add(1), 36)
}

// js is s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// mustJSON is v encoded as JSON; v is one of the mock's own types, which
// always encode.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mockllm: encode: " + err.Error())
	}
	return string(b)
}

// jsonBody sets ctx's body to the JSON body, gzipped when the request asked.
func jsonBody(ctx *fasthttp.RequestCtx, st steer, body string) {
	ctx.SetContentType("application/json")
	if st.gzip {
		ctx.Response.SetBodyRaw(fasthttp.AppendGzipBytes(nil, []byte(body)))
		ctx.Response.Header.Set("Content-Encoding", "gzip")
		return
	}
	ctx.SetBodyString(body)
}

func jsonString(s string) (string, error) {
	return strconv.Quote(s), nil // the mock's words are ASCII: Go and JSON quoting agree
}
