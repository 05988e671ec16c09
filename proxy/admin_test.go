package proxy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// A path the admin listener does not serve gets 404 naming those it does,
// extra paths included, not an empty body (new-user trial: GET / on the
// admin listener).
func TestAdminNotFoundNamesThePaths(t *testing.T) {
	served := 0
	h := AdminHandler(prometheus.NewRegistry(), nil, map[string]fasthttp.RequestHandler{
		"/admin/usage": func(*fasthttp.RequestCtx) { served++ },
		"/admin/keys/": func(*fasthttp.RequestCtx) { served++ },
	})
	for _, path := range []string{"/", "/metric", "/admin"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		h(&ctx)
		body := string(ctx.Response.Body())
		if ctx.Response.StatusCode() != 404 {
			t.Errorf("%s: %d, want 404", path, ctx.Response.StatusCode())
		}
		for _, want := range []string{"/healthz", "/readyz", "/metrics", "/admin/keys/", "/admin/usage"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: body %q does not name %s", path, body, want)
			}
		}
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/admin/keys/abc")
	h(&ctx)
	if served != 1 || ctx.Response.StatusCode() != 200 {
		t.Errorf("/admin/keys/abc: served %d times, status %d: the prefix entry must still serve it", served, ctx.Response.StatusCode())
	}
}
