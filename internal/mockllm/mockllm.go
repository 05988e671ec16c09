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
	key string // Options.APIKey

	byteCounted bool // Options.ByteCountedChat

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

// Options configure a mock. The zero value is what Start runs: no key is
// checked.
type Options struct {
	// APIKey, when not empty, is the key every request must carry, in its
	// flavor's header: "Authorization: Bearer K" on OpenAI paths (/v1/…),
	// "x-api-key: K" on Anthropic paths (/v1/messages…), "api-key: K" on
	// Azure paths (/openai/…). "Authorization: Bearer K" is accepted on
	// every path (Anthropic's auth token; Azure's Entra ID token and, on the
	// v1 API, its key). A request without it is answered 401 in the flavor's
	// error shape.
	APIKey string
	// ByteCountedChat, when true, makes chat completions report
	// len(body)/4 prompt tokens instead of the weigher's count, and read
	// the model, stream and output limit without weighing: a load
	// benchmark's upstream then costs little CPU next to the proxy it
	// measures (tokenizing a 128 KiB body takes milliseconds). The other
	// endpoints still count with the weigher.
	ByteCountedChat bool
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves until Close, with
// the zero Options. Errors: the address cannot be bound, or the weigher
// cannot start.
func Start(addr string) (*Server, error) { return StartWith(addr, Options{}) }

// StartWith is Start with options. Errors: as Start.
func StartWith(addr string, o Options) (*Server, error) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 16})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mockllm: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, w: w, key: o.APIKey, byteCounted: o.ByteCountedChat}
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "mockllm", MaxRequestBodySize: 64 << 20, StreamRequestBody: false}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server: it closes the listener itself as well, since
// fasthttp's Shutdown closes only a listener its Serve has already
// registered, and Serve runs on a goroutine that may not have started yet
// (it then fails on the closed listener and returns). Errors: Shutdown's.
func (s *Server) Close() error {
	err := s.srv.Shutdown()
	_ = s.ln.Close() // already closed when Serve had registered it
	return err
}

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

	rt := routeOf(string(ctx.Path()))
	if rt.endpoint == models && rt.flavor == flavorOpenAI && speaksAnthropic(&ctx.Request.Header) {
		// GET /v1/models is both APIs' path: the caller's headers say which
		// it speaks, hence the key header and the list's shape.
		rt.flavor = flavorAnthropic
	}
	if rt.endpoint != models && weigher.ReadMethod(string(ctx.Method())) {
		// A read method (GET, HEAD, DELETE, OPTIONS) on a generating
		// endpoint's path is a stored-object call (GET
		// /v1/chat/completions lists stored completions), which the mock,
		// keeping nothing, answers with its 404 as it does every stored
		// object's path, not with the JSON parse error of an empty body
		// (trial21: the OpenAI SDK's chat.completions.list() read "could
		// not parse the JSON body"). Other methods are served as POST, as
		// a lenient upstream serves them.
		rt.endpoint = none
	}
	if !s.keyOK(&ctx.Request.Header, rt.flavor) {
		unauthorized(ctx, rt.flavor)
		return
	}
	if cost := ctx.Request.Header.Peek("x-mock-litellm-cost"); len(cost) > 0 {
		// What a LiteLLM proxy says it billed, sent as it does on every
		// answer (docs.litellm.ai, "Response headers"), so llmguard's
		// charge of it can be tried without a LiteLLM (trial23).
		ctx.Response.Header.SetBytesV("x-litellm-response-cost", cost)
	}
	if st := ctx.Request.Header.Peek("x-mock-status"); len(st) > 0 {
		code, _ := strconv.Atoi(string(st))
		switch rt.flavor {
		case flavorAnthropic:
			anthropicError(ctx, code, anthropicErrorType(code), fmt.Sprintf("mock error %d", code))
		case flavorAzure:
			azureError(ctx, code, fmt.Sprintf("mock error %d", code))
		default:
			ctx.SetStatusCode(code)
			ctx.SetContentType("application/json")
			fmt.Fprintf(ctx, `{"error":{"message":"mock error %d","type":"server_error","param":null,"code":null}}`, code)
		}
		return
	}
	if rt.needsVersion && len(ctx.QueryArgs().Peek("api-version")) == 0 {
		azureError(ctx, fasthttp.StatusNotFound, azureNotFound)
		return
	}
	if rt.deployment != "" {
		withDeployment(&ctx.Request, rt.deployment)
	}
	switch rt.endpoint {
	case models:
		ctx.SetContentType("application/json")
		if rt.flavor == flavorAnthropic {
			ctx.SetBodyString(anthropicModels)
		} else {
			ctx.SetBodyString(openAIModels)
		}
	case chatCompletions:
		s.chat(ctx, rt.flavor)
	case responsesAPI:
		s.responses(ctx)
	case textCompletions:
		s.completions(ctx)
	case embeddingsAPI:
		s.embeddings(ctx)
	case messagesAPI:
		s.messages(ctx)
	case countTokensAPI:
		s.countTokens(ctx)
	default:
		switch rt.flavor {
		case flavorAnthropic:
			anthropicError(ctx, fasthttp.StatusNotFound, "not_found_error", "Not found")
		case flavorAzure:
			azureError(ctx, fasthttp.StatusNotFound, azureNotFound)
		default:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetContentType("application/json")
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": unknownPathMessage(string(ctx.Method()), string(ctx.Path())),
				"type": "invalid_request_error", "param": nil, "code": "unknown_url"}})
			ctx.SetBody(b)
		}
	}
}

// The model lists GET /v1/models answers, one model each. OpenAI's
// (https://platform.openai.com/docs/api-reference/models/list):
// {"object":"list","data":[{"id","object":"model","created" (Unix s),
// "owned_by"}]}. Anthropic's
// (https://platform.claude.com/docs/en/api/models-list): {"data":[{"type":
// "model","id","display_name","created_at" (RFC 3339)}],"has_more",
// "first_id","last_id"}, newest first, paged by after_id and before_id
// (one page here).
const (
	openAIModels    = `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`
	anthropicModels = `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}`
)

// speaksAnthropic reports whether a request on a path both APIs share
// (GET /v1/models) is an Anthropic client's: it sends anthropic-version
// (every Anthropic SDK does, and the API requires it), or its key in
// x-api-key without an Authorization header.
func speaksAnthropic(h *fasthttp.RequestHeader) bool {
	return len(h.Peek("anthropic-version")) > 0 || len(h.Peek("x-api-key")) > 0 && len(h.Peek("Authorization")) == 0
}

// keyOK reports whether a request carries the key the mock requires, if
// any: "Authorization: Bearer K" on any path, "x-api-key: K" on Anthropic
// paths, "api-key: K" on Azure paths.
func (s *Server) keyOK(h *fasthttp.RequestHeader, fl flavor) bool {
	if s.key == "" || string(h.Peek("Authorization")) == "Bearer "+s.key {
		return true
	}
	switch fl {
	case flavorAnthropic:
		return string(h.Peek("x-api-key")) == s.key
	case flavorAzure:
		return string(h.Peek("api-key")) == s.key
	}
	return false
}

// unauthorized answers 401 in the flavor's error shape.
func unauthorized(ctx *fasthttp.RequestCtx, fl flavor) {
	switch fl {
	case flavorAnthropic:
		anthropicError(ctx, fasthttp.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	case flavorAzure:
		azureError(ctx, fasthttp.StatusUnauthorized, "Access denied: the api-key header is missing or is not the resource's key.")
	default:
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
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
	prompt        int64 // x-mock-prompt-tokens, when hasPrompt
	hasPrompt     bool
	reasoning     int64         // x-mock-reasoning-tokens
	cacheRead     int64         // x-mock-cache-read
	cacheWrite    int64         // x-mock-cache-write
	cacheWrite1h  int64         // x-mock-cache-write-1h, at most cacheWrite
	audioIn       int64         // x-mock-audio-input-tokens
	audioOut      int64         // x-mock-audio-output-tokens
	rejected      int64         // x-mock-rejected-prediction-tokens
	searches      int64         // x-mock-web-searches
	delay         time.Duration // x-mock-delay-ms, before each content delta
	noUsage       bool
	gzip          bool
	crlf          bool
	splitDelta    bool
	errorUsage    bool
	errAfter      int // x-mock-stream-error: after=K
	cutAfter      int // x-mock-stream-cut: K
	// tier is x-mock-service-tier: the service_tier chat and Responses
	// answers say they were served at ("" : none named).
	tier string
}

// tierField is the chat answer member naming st's served tier, with its
// leading comma ("" when none is asked).
func (st steer) tierField() string {
	if st.tier == "" {
		return ""
	}
	return `,"service_tier":` + js(st.tier)
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
	st.prompt, st.hasPrompt = num("x-mock-prompt-tokens")
	st.reasoning, _ = num("x-mock-reasoning-tokens")
	st.cacheRead, _ = num("x-mock-cache-read")
	st.cacheWrite, _ = num("x-mock-cache-write")
	h1, _ := num("x-mock-cache-write-1h")
	st.cacheWrite1h = min(h1, st.cacheWrite)
	st.audioIn, _ = num("x-mock-audio-input-tokens")
	st.audioOut, _ = num("x-mock-audio-output-tokens")
	st.rejected, _ = num("x-mock-rejected-prediction-tokens")
	st.searches, _ = num("x-mock-web-searches")
	d, _ := num("x-mock-delay-ms")
	st.delay = time.Duration(d) * time.Millisecond
	st.noUsage = set("x-mock-no-usage")
	st.gzip = set("x-mock-gzip")
	st.crlf = set("x-mock-sse-crlf")
	st.splitDelta = set("x-mock-split-delta")
	st.errorUsage = set("x-mock-error-usage")
	st.tier = strings.TrimSpace(string(h.Peek("x-mock-service-tier")))
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

// inputTokens is the input the mock reports: x-mock-prompt-tokens (context
// the upstream holds and the body does not show), else counted.
func (st steer) inputTokens(counted int64) int64 {
	if st.hasPrompt {
		return st.prompt
	}
	return counted
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

// unknownPathMessage is the mock's 404 message for a path it does not
// serve: OpenAI's own ("Invalid URL (POST /chat/completions)"), and, for
// a path that does not start with /v1/, that an OpenAI SDK's base URL
// needs the /v1 (trial3: an SDK pointed at llmguard without it read
// "unknown path" and nothing more).
func unknownPathMessage(method, path string) string {
	msg := "Invalid URL (" + method + " " + path + ")"
	if !strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/openai/") {
		msg += ": the OpenAI API's paths start with /v1/, so an OpenAI SDK's base URL ends in /v1 (e.g. http://127.0.0.1:8080/v1)"
	}
	return msg
}
