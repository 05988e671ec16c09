package proxy

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// recordingUpstream is an httptest upstream that answers 200 with its own
// name and records each request it got: path and credential fields.
type recordingUpstream struct {
	name string
	srv  *httptest.Server
	mu   sync.Mutex
	got  []seenRequest
}

// seenRequest is what a recordingUpstream saw of one request.
type seenRequest struct {
	method, path          string
	apiKey, authorization string // the x-api-key and Authorization fields
}

func newRecordingUpstream(t *testing.T, name string) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{name: name}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.got = append(u.got, seenRequest{method: r.Method, path: r.URL.Path,
			apiKey: r.Header.Get("x-api-key"), authorization: r.Header.Get("Authorization")})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		// A chat answer with its usage (read by the tap on a chat call),
		// naming the upstream that served it.
		io.WriteString(w, `{"object":"chat.completion","upstream":"`+name+`","model":"gpt-4o-mini",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// take returns and forgets what u saw.
func (u *recordingUpstream) take() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	got := u.got
	u.got = nil
	return got
}

// anthropicRouteRig is a Proxy on a loopback socket in front of the
// recordingUpstreams it was given, on a memory store whose clock never
// moves, with one virtual key (sk-route) under a tokens rule.
type anthropicRouteRig struct {
	t   *testing.T
	url string
}

// routeUpstreamKey is the key llmguard sends the upstream named name.
func routeUpstreamKey(name string) string { return "sk-up-" + name }

// newAnthropicRouteRig serves ups (flavor and path_prefix each) in order;
// with changes the server's settings.
func newAnthropicRouteRig(t *testing.T, ups []routeRigUpstream, with ...func(*fasthttp.Server)) *anthropicRouteRig {
	t.Helper()
	cfg, err := config.Parse([]byte(`
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1"}]
keys: [{key: sk-route, user: alice, tenant: acme}]
models:
  gpt-4o-mini: {encoding: o200k_base, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, default_max_output_tokens: 256}
limits:
  - {name: user-tokens, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m, err := meter.NewMetrics(prometheus.NewRegistry(), meter.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var upstreams []*Upstream
	for _, u := range ups {
		upstreams = append(upstreams, &Upstream{Name: u.rec.name, Flavor: u.flavor, BaseURL: u.rec.srv.URL, PathPrefix: u.prefix,
			APIKey: routeUpstreamKey(u.rec.name), Timeout: 30 * time.Second})
	}
	px, err := New(Options{
		Upstreams: upstreams, Policy: pol, Weigher: testWeigher(t), Metrics: m,
		Store:  bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return frozen }, SweepEvery: -1}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return frozen },
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: px.Handle, ErrorHandler: px.ErrorHandler, Logger: quietLogger{}}
	for _, f := range with {
		f(srv)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return &anthropicRouteRig{t: t, url: "http://" + ln.Addr().String()}
}

// routeRigUpstream is one upstream of an anthropicRouteRig.
type routeRigUpstream struct {
	rec    *recordingUpstream
	flavor Flavor
	prefix string
}

// do sends method path with body (none when empty) and the header fields
// (name, value pairs); it returns the status and body.
func (r *anthropicRouteRig) do(method, path, body string, fields ...string) (int, string) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Set(fields[i], fields[i+1])
	}
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The Anthropic SDK's calls other than /v1/messages (models.list() is GET
// /v1/models) carry anthropic-version and go to the Anthropic upstream
// with its key in x-api-key; the OpenAI SDK's (no such field) go where
// they went, and so does any path a prefix or a dialect claims, and any
// endpoint llmguard weighs, whatever the field. Real sockets both sides.
func TestAnthropicVersionRoutesToAnthropic(t *testing.T) {
	oa, an, az, pre := newRecordingUpstream(t, "oa"), newRecordingUpstream(t, "an"),
		newRecordingUpstream(t, "az"), newRecordingUpstream(t, "pre")
	rig := newAnthropicRouteRig(t, []routeRigUpstream{
		{rec: oa, flavor: FlavorOpenAI}, {rec: an, flavor: FlavorAnthropic}, {rec: az, flavor: FlavorAzure},
		{rec: pre, flavor: FlavorOpenAI, prefix: "/pre"},
	})
	const version = "2023-06-01"
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	for _, c := range []struct {
		name, method, path, body string
		fields                   []string
		want                     *recordingUpstream
		wantPath                 string
	}{
		{name: "models.list", method: "GET", path: "/v1/models",
			fields: []string{"x-api-key", "sk-route", "anthropic-version", version}, want: an},
		{name: "models.retrieve", method: "GET", path: "/v1/models/claude-sonnet-4-5",
			fields: []string{"x-api-key", "sk-route", "anthropic-version", version}, want: an},
		{name: "auth_token (Bearer)", method: "GET", path: "/v1/models",
			fields: []string{"Authorization", "Bearer sk-route", "anthropic-version", version}, want: an},
		{name: "field name in lower and upper case", method: "GET", path: "/v1/files",
			fields: []string{"x-api-key", "sk-route", "ANTHROPIC-VERSION", version}, want: an},
		{name: "OpenAI SDK's models.list", method: "GET", path: "/v1/models",
			fields: []string{"Authorization", "Bearer sk-route"}, want: oa},
		{name: "empty anthropic-version", method: "GET", path: "/v1/models",
			fields: []string{"x-api-key", "sk-route", "anthropic-version", " "}, want: oa},
		{name: "chat with the field", method: "POST", path: "/v1/chat/completions", body: chat,
			fields: []string{"Authorization", "Bearer sk-route", "anthropic-version", version}, want: oa},
		{name: "chat, another spelling, with the field", method: "POST", path: "/V1/Chat/Completions", body: chat,
			fields: []string{"Authorization", "Bearer sk-route", "anthropic-version", version}, want: oa},
		{name: "under a path_prefix with the field", method: "GET", path: "/pre/v1/models",
			fields: []string{"Authorization", "Bearer sk-route", "anthropic-version", version}, want: pre, wantPath: "/v1/models"},
		{name: "Azure's path with the field", method: "GET", path: "/openai/v1/models",
			fields: []string{"api-key", "sk-route", "anthropic-version", version}, want: az},
	} {
		status, body := rig.do(c.method, c.path, c.body, c.fields...)
		if status != 200 {
			t.Errorf("%s: status %d (%s), want 200", c.name, status, body)
			continue
		}
		wantPath := c.wantPath
		if wantPath == "" {
			wantPath = c.path
		}
		for _, u := range []*recordingUpstream{oa, an, az, pre} {
			got := u.take()
			if u != c.want {
				if len(got) != 0 {
					t.Errorf("%s: upstream %s got %+v, want nothing (the call is %s's)", c.name, u.name, got, c.want.name)
				}
				continue
			}
			if len(got) != 1 || got[0].path != wantPath {
				t.Errorf("%s: upstream %s got %+v, want one %s", c.name, u.name, got, wantPath)
				continue
			}
			// The upstream's own key in its flavor's field; never the
			// caller's key, in any field.
			switch g := got[0]; {
			case u == an && (g.apiKey != routeUpstreamKey("an") || g.authorization != ""):
				t.Errorf("%s: Anthropic upstream got x-api-key %q, Authorization %q; want its own key in x-api-key only", c.name, g.apiKey, g.authorization)
			case (u == oa || u == pre) && (g.authorization != "Bearer "+routeUpstreamKey(u.name) || g.apiKey != ""):
				t.Errorf("%s: %s got x-api-key %q, Authorization %q; want its own key as a Bearer only", c.name, u.name, g.apiKey, g.authorization)
			case strings.Contains(g.apiKey+g.authorization, "sk-route"):
				t.Errorf("%s: the caller's key reached %s: %+v", c.name, u.name, g)
			}
		}
	}
}

// anthropicErrorType is the error.type of an Anthropic-shaped error body,
// "" when body is not one.
func anthropicErrorType(body string) string {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Type != "error" {
		return ""
	}
	return e.Error.Type
}

// An Anthropic SDK's call that llmguard answers itself is answered in
// Anthropic's shape, and charged as before: /v1/files under a tokens rule
// is unmetered_endpoint (403), forwarded to no upstream; an unknown key is
// 401; a doubled /v1 is 404.
func TestAnthropicVersionAnswersInAnthropicShape(t *testing.T) {
	oa, an := newRecordingUpstream(t, "oa"), newRecordingUpstream(t, "an")
	rig := newAnthropicRouteRig(t, []routeRigUpstream{{rec: oa, flavor: FlavorOpenAI}, {rec: an, flavor: FlavorAnthropic}})
	for _, c := range []struct {
		name, method, path, body, key string
		status                        int
		errType                       string
	}{
		{"files.upload under a tokens rule", "POST", "/v1/files", `{"x":1}`, "sk-route", 403, "permission_error"},
		{"unknown key", "GET", "/v1/models", "", "sk-nobody", 401, "authentication_error"},
		{"base URL ending in /v1", "GET", "/v1/v1/models", "", "sk-route", 404, "not_found_error"},
	} {
		status, body := rig.do(c.method, c.path, c.body, "x-api-key", c.key, "anthropic-version", "2023-06-01")
		if status != c.status || anthropicErrorType(body) != c.errType {
			t.Errorf("%s: %d %s; want %d in Anthropic's shape, error.type %s", c.name, status, body, c.status, c.errType)
		}
		if n := len(oa.take()) + len(an.take()); n != 0 {
			t.Errorf("%s: %d requests reached an upstream, want none", c.name, n)
		}
	}
	// Without the field, the same refusal is OpenAI's, as before.
	status, body := rig.do("POST", "/v1/files", `{"x":1}`, "Authorization", "Bearer sk-route")
	if status != 403 || !strings.Contains(body, `"code":"unmetered_endpoint"`) {
		t.Errorf("/v1/files without anthropic-version: %d %s; want 403 unmetered_endpoint in OpenAI's shape", status, body)
	}
}

// A request fasthttp refuses before the handler (a body over the server's
// MaxRequestBodySize, read by the server) is answered by ErrorHandler in
// the shape of the upstream its path and fields route to: Anthropic's for
// an Anthropic SDK's call to /v1/files, OpenAI's without the field.
func TestAnthropicVersionShapesErrorHandler(t *testing.T) {
	oa, an := newRecordingUpstream(t, "oa"), newRecordingUpstream(t, "an")
	rig := newAnthropicRouteRig(t, []routeRigUpstream{{rec: oa, flavor: FlavorOpenAI}, {rec: an, flavor: FlavorAnthropic}},
		func(s *fasthttp.Server) { s.MaxRequestBodySize = 16 })
	big := `{"purpose":"` + strings.Repeat("x", 64) + `"}`
	status, body := rig.do("POST", "/v1/files", big, "x-api-key", "sk-route", "anthropic-version", "2023-06-01")
	if status != 413 || anthropicErrorType(body) == "" {
		t.Errorf("with anthropic-version: %d %s; want 413 in Anthropic's shape", status, body)
	}
	status, body = rig.do("POST", "/v1/files", big, "Authorization", "Bearer sk-route")
	if status != 413 || anthropicErrorType(body) != "" || !strings.Contains(body, `"code":`) {
		t.Errorf("without anthropic-version: %d %s; want 413 in OpenAI's shape", status, body)
	}
	if n := len(oa.take()) + len(an.take()); n != 0 {
		t.Errorf("%d requests reached an upstream, want none", n)
	}
}

// In a config without an Anthropic upstream, anthropic-version moves
// nothing: the fallback (OpenAI) upstream serves what it served before.
func TestAnthropicVersionWithoutAnthropicUpstream(t *testing.T) {
	oa := newRecordingUpstream(t, "oa")
	rig := newAnthropicRouteRig(t, []routeRigUpstream{{rec: oa, flavor: FlavorOpenAI}})
	status, body := rig.do("GET", "/v1/models", "", "x-api-key", "sk-route", "anthropic-version", "2023-06-01")
	got := oa.take()
	if status != 200 || len(got) != 1 || got[0].path != "/v1/models" || got[0].authorization != "Bearer "+routeUpstreamKey("oa") {
		t.Errorf("status %d (%s), OpenAI upstream got %+v; want it to serve GET /v1/models with its own key", status, body, got)
	}
}

// route with and without anthropic-version: the field moves only a path
// that no prefix and no dialect claims and that is not weighed, and only
// when an Anthropic upstream is configured.
func TestRouterAnthropicVersion(t *testing.T) {
	oa := &Upstream{Name: "oa", Flavor: FlavorOpenAI}
	an := &Upstream{Name: "an", Flavor: FlavorAnthropic}
	az := &Upstream{Name: "az", Flavor: FlavorAzure}
	pre := &Upstream{Name: "pre", Flavor: FlavorOpenAI, PathPrefix: "/pre"}
	r := newRouter([]*Upstream{oa, an, az, pre})
	var h fasthttp.RequestHeader
	h.Set("anthropic-version", "2023-06-01")
	for path, want := range map[string]*Upstream{
		"/v1/models": an, "/v1/files": an, "/v1/complete": an, "/v1/organizations/x": an, "/": an,
		"/v1/messages": an, "/v1/messages/batches": an,
		"/v1/chat/completions": oa, "/v1/responses": oa, "/v1/completions": oa, "/v1/embeddings": oa,
		"/v1/images/generations": oa, "/chat/completions": oa, "/x/v1/messages": oa,
		"/openai/v1/models": az, "/pre/v1/models": pre, "/x/v1/messages/count_tokens": oa,
	} {
		if got, _ := r.route(path, &h); got != want {
			t.Errorf("%s with anthropic-version: routed to %s, want %s", path, got.Name, want.Name)
		}
		if got, _ := r.route(path, nil); want == an && got == an && path != "/v1/messages" && path != "/v1/messages/batches" {
			t.Errorf("%s without anthropic-version: routed to the Anthropic upstream", path)
		}
	}
	if got, _ := newRouter([]*Upstream{oa, az}).route("/v1/models", &h); got != oa {
		t.Errorf("without an Anthropic upstream: routed to %s, want the fallback", got.Name)
	}
}

// TestKnownPathsNotMovedByAnthropicVersion: no path of knownPaths is
// routed elsewhere for an anthropic-version field, with or without an
// Anthropic upstream, which is what lets Proxy.route skip the field's
// lookup for them.
func TestKnownPathsNotMovedByAnthropicVersion(t *testing.T) {
	var h fasthttp.RequestHeader
	h.Set("anthropic-version", "2023-06-01")
	oa := &Upstream{Name: "oa", Flavor: FlavorOpenAI}
	an := &Upstream{Name: "an", Flavor: FlavorAnthropic}
	az := &Upstream{Name: "az", Flavor: FlavorAzure}
	for _, ups := range [][]*Upstream{{oa, an, az}, {oa, an}, {an}, {az, an}} {
		r := newRouter(ups)
		for _, p := range knownPaths {
			with, _ := r.route(p, &h)
			if without, _ := r.route(p, nil); with != without {
				t.Errorf("%s: anthropic-version moves it from %v to %v", p, without, with)
			}
		}
	}
}

// FuzzRouteAnthropicVersion: anthropic-version changes the route of a path
// only to the first Anthropic upstream, only for a path no prefix or
// dialect claims, and never for a path that names an endpoint of the
// weigher's kind table (weighed, or count_tokens).
func FuzzRouteAnthropicVersion(f *testing.F) {
	for _, p := range []string{"/v1/models", "/v1/chat/completions", "/pre/v1/models", "/openai/v1/x", "/v1/messages",
		"/V1/CHAT/COMPLETIONS;x", "//v1/responses/", "/v1/files/abc", "/pre", "/prex/v1/models"} {
		f.Add(p)
	}
	oa := &Upstream{Name: "oa", Flavor: FlavorOpenAI}
	an := &Upstream{Name: "an", Flavor: FlavorAnthropic}
	az := &Upstream{Name: "az", Flavor: FlavorAzure}
	pre := &Upstream{Name: "pre", Flavor: FlavorOpenAI, PathPrefix: "/pre"}
	r := newRouter([]*Upstream{oa, an, az, pre})
	var h fasthttp.RequestHeader
	h.Set("anthropic-version", "2023-06-01")
	f.Fuzz(func(t *testing.T, path string) {
		with, withPath := r.route(path, &h)
		without, withoutPath := r.route(path, nil)
		if withPath != withoutPath {
			t.Fatalf("%q: upstream path %q with the field, %q without", path, withPath, withoutPath)
		}
		if with == without {
			return
		}
		if with != an || without != oa {
			t.Fatalf("%q: the field moved it from %v to %v", path, without.Name, with.Name)
		}
		if k := classify([]byte("POST"), path); r.hasPrefixFor(path) || k.Weighed() || k.Path() != "" {
			t.Fatalf("%q: the field moved a prefixed or known (%v) path", path, k)
		}
		for _, d := range dialects {
			if d != nil && d.claims(path) != claimNone {
				t.Fatalf("%q: the field moved a claimed path", path)
			}
		}
	})
}

// BenchmarkRouteChat is route's cost for an OpenAI SDK's chat request (no
// anthropic-version field, six others) in the embedded default's shape (an
// OpenAI and an Anthropic upstream): "fields" reads the request's fields,
// "nofields" (h nil) does not, so the two in one run give the cost of the
// field's lookup.
func BenchmarkRouteChat(b *testing.B) {
	r := newRouter([]*Upstream{{Name: "oa", Flavor: FlavorOpenAI}, {Name: "an", Flavor: FlavorAnthropic}})
	var h fasthttp.RequestHeader
	for _, f := range []string{"Host", "User-Agent", "Authorization", "Content-Type", "Accept", "X-Stainless-Lang"} {
		h.Set(f, "x")
	}
	for _, c := range []struct {
		name string
		h    *fasthttp.RequestHeader
	}{{"fields", &h}, {"nofields", nil}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if u, _ := r.route("/v1/chat/completions", c.h); u.Name != "oa" {
					b.Fatal(u.Name)
				}
			}
		})
	}
}
