package proxy

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// AdminHandler serves the admin listener:
//
//	GET /healthz  200 "ok" while the process runs (liveness only)
//	GET /readyz   200 with a JSON body describing the store, while the
//	              proxy can serve; 503 with that body once it cannot
//	              (shutting down)
//	GET /metrics  Prometheus exposition of g
//
// Any other path gets 404 with a text body naming the paths served.
// ready returns the /readyz body and whether the proxy can serve (false:
// the answer is 503); it may be nil (200, {"status":"ready"}). extra maps more paths (such
// as /admin/usage) to their handlers, which do their own authorization; a
// path ending in "/" (such as /admin/keys/) also serves every path under
// it that has no entry of its own.
func AdminHandler(g prometheus.Gatherer, ready func() (body any, ok bool), extra map[string]fasthttp.RequestHandler) fasthttp.RequestHandler {
	metrics := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	// A 404 names the paths served (an empty 404 at / told a newcomer
	// nothing), built once: extra is fixed for the handler's life.
	notFound := "404 not found: the admin listener serves " +
		strings.Join(append([]string{"/healthz", "/readyz", "/metrics"}, slices.Sorted(maps.Keys(extra))...), ", ") + "\n"
	return func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/healthz":
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("ok\n")
		case "/readyz":
			ctx.SetContentType("application/json")
			var body any = map[string]string{"status": "ready"}
			if ready != nil {
				var ok bool
				if body, ok = ready(); !ok {
					ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
				}
			}
			b, _ := json.Marshal(body)
			ctx.SetBody(b)
		case "/metrics":
			metrics(ctx)
		default:
			p := string(ctx.Path())
			if h, ok := extra[p]; ok {
				h(ctx)
				return
			}
			for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
				if h, ok := extra[p[:i+1]]; ok {
					h(ctx)
					return
				}
			}
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetContentType("text/plain")
			ctx.SetBodyString(notFound)
		}
	}
}
