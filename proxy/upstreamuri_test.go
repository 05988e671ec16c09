package proxy

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// setUpstreamURI joins the upstream's base URL, the path and the caller's
// query, a credential parameter dropped; a URI longer than its stack room
// comes out whole.
func TestSetUpstreamURI(t *testing.T) {
	up := &Upstream{scheme: "http", host: "up.example:8080", basePath: "/v1base"}
	long := strings.Repeat("x", uriStack)
	for _, tc := range []struct {
		uri, path, want string
	}{
		{"/v1/chat/completions", "/chat/completions", "http://up.example:8080/v1base/chat/completions"},
		{"/v1/chat/completions?a=1&b=two", "/chat/completions", "http://up.example:8080/v1base/chat/completions?a=1&b=two"},
		{"/v1/chat/completions?api-key=sk-secret&a=1", "/chat/completions", "http://up.example:8080/v1base/chat/completions?a=1"},
		{"/v1/chat/completions?q=" + long, "/chat/completions", "http://up.example:8080/v1base/chat/completions?q=" + long},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(tc.uri)
		var req fasthttp.Request
		setUpstreamURI(&req, up, tc.path, &ctx)
		if got := req.URI().String(); got != tc.want {
			t.Errorf("%.60s: %.90s, want %.90s", tc.uri, got, tc.want)
		}
	}
}
