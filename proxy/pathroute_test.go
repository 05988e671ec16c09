package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestKnownRoutesAsRouted: the route newRouter works out for each of
// knownPaths (pathRoute) is the one route, the dialect's endpoint and
// classify give for it, under routers of every shape (an upstream of each
// flavor alone, all of them, a path_prefix, no Anthropic upstream), and a
// path no upstream serves has none, so that Proxy.route's shortcut serves
// each known path as the long way would.
func TestKnownRoutesAsRouted(t *testing.T) {
	up := func(name string, f Flavor, prefix string) *Upstream {
		u := &Upstream{Name: name, Flavor: f, PathPrefix: prefix, BaseURL: "http://127.0.0.1:1"}
		if err := u.init(); err != nil {
			t.Fatal(err)
		}
		return u
	}
	oa, an, az := up("oa", FlavorOpenAI, ""), up("an", FlavorAnthropic, ""), up("az", FlavorAzure, "")
	pre := up("pre", FlavorOpenAI, "/pre")
	served := 0
	for _, ups := range [][]*Upstream{{oa}, {an}, {az}, {oa, an}, {oa, az}, {an, az}, {oa, an, az, pre}, {az, an, oa}, {pre}} {
		r := newRouter(ups)
		if len(r.known) != len(knownPaths) {
			t.Fatalf("%d known routes for %d known paths", len(r.known), len(knownPaths))
		}
		for i, p := range knownPaths {
			kr := r.known[i]
			wantUp, wantUpPath := r.route(p, nil)
			if kr.up != wantUp {
				t.Errorf("%v: %s: known route's upstream %v, route's %v", names(ups), p, names([]*Upstream{kr.up}), names([]*Upstream{wantUp}))
				continue
			}
			if wantUp == nil {
				continue
			}
			served++
			wantPath, wantDep := wantUp.dialect.endpoint(wantUpPath)
			if kr.upPath != wantUpPath || kr.path != wantPath || kr.deployment != wantDep {
				t.Errorf("%v: %s: known route (%q, %q, %q), route and endpoint (%q, %q, %q)", names(ups), p,
					kr.upPath, kr.path, kr.deployment, wantUpPath, wantPath, wantDep)
			}
			if k := classify([]byte(fasthttp.MethodPost), wantPath); kr.postKind != k {
				t.Errorf("%v: %s: known route's kind %v, classify's %v", names(ups), p, kr.postKind, k)
			}
		}
	}
	if served == 0 {
		t.Fatal("no known path served by any router")
	}
}

// TestKnownRouteKindByMethod: the kind of a request to a known path is its
// known route's for a POST only; another method is classified as before
// (a GET to a weighed endpoint is not weighed).
func TestKnownRouteKindByMethod(t *testing.T) {
	px := newPathRig(t, cannedJSON)
	for _, method := range []string{fasthttp.MethodPost, fasthttp.MethodGet, "post", fasthttp.MethodDelete} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI("http://llmguard/v1/chat/completions")
		x := &exchange{}
		if _, _, r := px.route(&ctx, x); r != nil {
			t.Fatalf("%s: refused by route: %s", method, r.err.message)
		}
		if x.known == nil {
			t.Fatalf("%s: a known path without its known route", method)
		}
		if got, want := x.classify(ctx.Method()), classify(ctx.Method(), x.path); got != want {
			t.Errorf("%s /v1/chat/completions: kind %v, classify's %v", method, got, want)
		}
	}
}

// TestKnownRouteShortcutSameExchange: Proxy.route's shortcut for a known
// path leaves the exchange as the long way does (a router without known
// routes): the same upstream, endpoint path, deployment, upstream path and
// kind, for every known path and router shape, Azure's /openai/ paths
// (whose endpoint differs from the path) among them.
func TestKnownRouteShortcutSameExchange(t *testing.T) {
	up := func(name string, f Flavor, prefix string) *Upstream {
		u := &Upstream{Name: name, Flavor: f, PathPrefix: prefix, BaseURL: "http://127.0.0.1:1"}
		if err := u.init(); err != nil {
			t.Fatal(err)
		}
		return u
	}
	oa, an, az := up("oa", FlavorOpenAI, ""), up("an", FlavorAnthropic, ""), up("az", FlavorAzure, "")
	for _, ups := range [][]*Upstream{{oa}, {az}, {oa, an, az}, {an}, {az, oa}} {
		fast := &Proxy{router: newRouter(ups)}
		slow := &Proxy{router: newRouter(ups)}
		slow.router.known = nil
		for _, p := range knownPaths {
			for _, method := range []string{fasthttp.MethodPost, fasthttp.MethodGet} {
				var ctx fasthttp.RequestCtx
				ctx.Request.Header.SetMethod(method)
				ctx.Request.SetRequestURI("http://llmguard" + p)
				var xf, xs exchange
				pf, uf, rf := fast.route(&ctx, &xf)
				ps, us, rs := slow.route(&ctx, &xs)
				if (rf == nil) != (rs == nil) || pf != ps || uf != us {
					t.Errorf("%v %s %s: shortcut (%q, %q, refused %v), long way (%q, %q, refused %v)", names(ups), method, p, pf, uf, rf != nil, ps, us, rs != nil)
					continue
				}
				if xf.upstream != xs.upstream || xf.path != xs.path || xf.deployment != xs.deployment || xf.knownPath != xs.knownPath {
					t.Errorf("%v %s %s: shortcut's exchange (%v, %q, %q), the long way's (%v, %q, %q)", names(ups), method, p,
						names([]*Upstream{xf.upstream}), xf.path, xf.deployment, names([]*Upstream{xs.upstream}), xs.path, xs.deployment)
				}
				if rf == nil && xf.classify(ctx.Method()) != xs.classify(ctx.Method()) {
					t.Errorf("%v %s %s: kind %v by the shortcut, %v the long way", names(ups), method, p, xf.classify(ctx.Method()), xs.classify(ctx.Method()))
				}
			}
		}
	}
}

func names(ups []*Upstream) []string {
	var n []string
	for _, u := range ups {
		if u == nil {
			n = append(n, "<nil>")
			continue
		}
		n = append(n, u.Name)
	}
	return n
}
