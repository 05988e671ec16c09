// Package mockllm is a small OpenAI-compatible server for tests, benchmarks
// and the quickstart. It answers /v1/chat/completions with realistic JSON or
// SSE (with usage), and /v1/models. Requests steer it with headers:
//
//	x-mock-completion-tokens: N   reply with exactly N output tokens
//	                              (default: min(max_tokens, 16))
//	x-mock-delay-ms: N            wait N ms before each streamed chunk
//	x-mock-status: N              answer N with an OpenAI error body
//	x-mock-no-usage: 1            omit usage (JSON and stream)
//	x-mock-gzip: 1                gzip a JSON answer whatever Accept-Encoding says
//
// prompt_tokens is counted with the same weigher llmguard uses, so the
// mock reports what the OpenAI API would for plain-text messages.
package mockllm

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
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
	// StreamsCompleted counts streams written to the end ([DONE] flushed).
	StreamsCompleted atomic.Int64
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

	if st := ctx.Request.Header.Peek("x-mock-status"); len(st) > 0 {
		code, _ := strconv.Atoi(string(st))
		ctx.SetStatusCode(code)
		ctx.SetContentType("application/json")
		fmt.Fprintf(ctx, `{"error":{"message":"mock error %d","type":"server_error","param":null,"code":null}}`, code)
		return
	}
	switch string(ctx.Path()) {
	case "/v1/models":
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`)
	case "/v1/chat/completions":
		s.chat(ctx)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"unknown path","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	}
}

// words are single tokens in o200k_base and cl100k_base.
var words = []string{" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}

func (s *Server) chat(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !gjson.ValidBytes(body) {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	est := s.w.Chat(body)
	model := est.Model
	n := min(est.OutputTokens, 16)
	if h := ctx.Request.Header.Peek("x-mock-completion-tokens"); len(h) > 0 {
		n, _ = strconv.ParseInt(string(h), 10, 64)
	}
	delay, _ := strconv.Atoi(string(ctx.Request.Header.Peek("x-mock-delay-ms")))
	noUsage := len(ctx.Request.Header.Peek("x-mock-no-usage")) > 0
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[i%len(words)]
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
		est.InputTokens, n, est.InputTokens+n)
	id := "chatcmpl-mock" + strconv.FormatInt(time.Now().UnixNano(), 36)
	created := time.Now().Unix()

	if !est.Stream {
		ctx.SetContentType("application/json")
		content, _ := jsonString(strings.Join(parts, ""))
		u := `,"usage":` + usage
		if noUsage {
			u = ""
		}
		fmt.Fprintf(ctx, `{"id":%q,"object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}]%s,"system_fingerprint":"fp_mock"}`,
			id, created, model, content, u)
		if len(ctx.Request.Header.Peek("x-mock-gzip")) > 0 {
			ctx.Response.SetBodyRaw(fasthttp.AppendGzipBytes(nil, ctx.Response.Body()))
			ctx.Response.Header.Set("Content-Encoding", "gzip")
		}
		return
	}

	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	includeUsage := est.IncludeUsage && !noUsage
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		chunk := func(delta, finish, u string) bool {
			fin := "null"
			if finish != "" {
				fin = strconv.Quote(finish)
			}
			choices := `[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fin + `}]`
			if u != "" {
				choices = "[]"
			}
			usageField := ""
			if includeUsage {
				usageField = `,"usage":null`
				if u != "" {
					usageField = `,"usage":` + u
				}
			}
			fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":%d,\"model\":%q,\"system_fingerprint\":\"fp_mock\",\"choices\":%s%s}\n\n",
				id, created, model, choices, usageField)
			return w.Flush() == nil
		}
		if !chunk(`{"role":"assistant","content":"","refusal":null}`, "", "") {
			s.StreamsAborted.Add(1)
			return
		}
		for _, p := range parts {
			if delay > 0 {
				time.Sleep(time.Duration(delay) * time.Millisecond)
			}
			c, _ := jsonString(p)
			if !chunk(`{"content":`+c+`}`, "", "") {
				s.StreamsAborted.Add(1)
				return
			}
		}
		chunk(`{}`, "stop", "")
		if includeUsage {
			chunk("", "", usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		if w.Flush() == nil {
			s.StreamsCompleted.Add(1)
		}
	})
}

func jsonString(s string) (string, error) {
	return strconv.Quote(s), nil // the mock's words are ASCII: Go and JSON quoting agree
}
