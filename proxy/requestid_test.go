package proxy

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRequestIDOnEveryAnswer: every answer carries its x-llmguard-request-id
// (24 hex digits), once: a relayed answer, llmguard's own refusals before
// and after the body is read, the limits read-out, an unreachable upstream
// and a recovered panic.
func TestRequestIDOnEveryAnswer(t *testing.T) {
	idForm := regexp.MustCompile(`^[0-9a-f]{24}$`)
	px := newPathRig(t, cannedJSON)
	down := newPathRig(t, cannedJSON)
	down.opt.Upstreams[0].client.DialTimeout = func(string, time.Duration) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Err: errClientGone}
	}
	for _, c := range []struct {
		name, method, path, key string
		body                    []byte
		px                      *Proxy
		status                  int
	}{
		{name: "relayed", method: "POST", path: "/v1/chat/completions", key: "sk-bench", body: pathBody, px: px, status: 200},
		{name: "unknown key", method: "POST", path: "/v1/chat/completions", key: "sk-nobody", body: pathBody, px: px, status: 401},
		{name: "model in the path", method: "POST", path: "/v1/engines/davinci/completions", key: "sk-bench", body: pathBody, px: px, status: 400},
		{name: "not JSON", method: "POST", path: "/v1/chat/completions", key: "sk-bench", body: []byte("{"), px: px, status: 400},
		{name: "limits", method: "GET", path: "/v1/llmguard/limits", key: "sk-bench", px: px, status: 200},
		{name: "limits by POST", method: "POST", path: "/v1/llmguard/limits", key: "sk-bench", body: []byte("{}"), px: px, status: 405},
		{name: "upstream unreachable", method: "POST", path: "/v1/chat/completions", key: "sk-bench", body: pathBody, px: down, status: 502},
	} {
		var req fasthttp.Request
		req.Header.SetMethod(c.method)
		req.SetRequestURI("http://llmguard" + c.path)
		req.Header.Set("Authorization", "Bearer "+c.key)
		if c.body != nil {
			req.Header.SetContentType("application/json")
			req.SetBody(c.body)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, benchAddr, nil)
		c.px.Handle(&ctx)
		if st := ctx.Response.StatusCode(); st != c.status {
			t.Errorf("%s: status %d, want %d: %.200s", c.name, st, c.status, ctx.Response.Body())
		}
		ids := ctx.Response.Header.PeekAll("x-llmguard-request-id")
		if len(ids) != 1 || !idForm.Match(ids[0]) {
			t.Errorf("%s: request id fields %q, want one of 24 hex digits", c.name, ids)
		}
		if head := ctx.Response.Header.String(); strings.Count(strings.ToLower(head), "x-llmguard-request-id") != 1 {
			t.Errorf("%s: the id written %d times:\n%s", c.name, strings.Count(strings.ToLower(head), "x-llmguard-request-id"), head)
		}
		ctx.Request.ResetUserValues()
	}
}
