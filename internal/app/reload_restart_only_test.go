package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
)

// A reload that changes a setting read only at start-up (here
// max_body_bytes, which the proxy is built with) is logged as needing a
// restart, naming the field, and the running value stays, so that a later
// reload still changing it warns again; a reload of the same file warns of
// nothing. unmetered_paths applies at once, both ways: an entry removed
// closes the endpoint to the next call (403), an entry added opens it.
// Before, a reload logged only "config reloaded" and kept the old list: an
// operator who removed an entry believed the endpoint closed while calls
// went on past the token limits until a restart.
func TestReloadWarnsOfStartOnlySettings(t *testing.T) {
	const warning = "changes only at restart"
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(reloadConfig(extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("unmetered_paths: [\"/v1/images/*\"]\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	// images calls an unmetered endpoint through the proxy's handler: 403
	// when refused as unmetered, else forwarded (to an upstream that cannot
	// be reached: 502).
	images := func() int { return callImages(a) }
	if got := images(); got == fasthttp.StatusForbidden {
		t.Fatalf("start: an unmetered_paths endpoint got %d", got)
	}
	steps := []struct {
		name   string
		extra  string
		want   []string // fields warned of; none: no warning at all
		closed bool     // the images endpoint is refused (403)
	}{
		{name: "same file", extra: "unmetered_paths: [\"/v1/images/*\"]\n"},
		{name: "unmetered_paths removed", extra: "", closed: true},
		{name: "unmetered_paths added back", extra: "unmetered_paths: [\"/v1/images/*\"]\n"},
		{name: "max_body_bytes lowered", extra: "unmetered_paths: [\"/v1/images/*\"]\nmax_body_bytes: 1024\n",
			want: []string{"field=max_body_bytes"}},
		{name: "max_body_bytes still lowered", extra: "unmetered_paths: [\"/v1/images/*\"]\nmax_body_bytes: 1024\n",
			want: []string{"field=max_body_bytes"}},
	}
	for i, s := range steps {
		before := len(logs.String())
		write(s.extra)
		if err := a.Reload(path); err != nil {
			t.Fatalf("step %d (%s): reload: %v", i, s.name, err)
		}
		got := logs.String()[before:] // this step's lines only
		if len(s.want) == 0 && strings.Contains(got, warning) {
			t.Errorf("step %d (%s): warned of a restart-only change:\n%s", i, s.name, got)
		}
		for _, f := range s.want {
			if !strings.Contains(got, warning) || !strings.Contains(got, f) {
				t.Errorf("step %d (%s): no %q warning naming %s:\n%s", i, s.name, warning, f, got)
			}
		}
		if code := images(); (code == fasthttp.StatusForbidden) != s.closed {
			t.Errorf("step %d (%s): the unmetered_paths endpoint got %d, want refused (403): %v", i, s.name, code, s.closed)
		}
	}
}

// reloadConfig is the reload tests' config file: one upstream no request
// can reach, the key sk-reload and a token limit, then extra.
func reloadConfig(extra string) string {
	return `
listen: 127.0.0.1:8
admin_listen: 127.0.0.1:9
upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-reload, user: dev, tenant: dev-team}]
limits: [{name: user-tokens, scope: user, unit: tokens, rate: 100000, per: 1h}]
` + extra
}

// callImages calls an unmetered endpoint through a's handler with the key
// of reloadConfig: 403 when refused as unmetered, else forwarded (to the
// upstream that cannot be reached: 502).
func callImages(a *App) int {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.SetRequestURI("/v1/images/generations")
	ctx.Request.Header.Set("Authorization", "Bearer sk-reload")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.SetBodyString(`{"model":"dall-e-3","prompt":"a cat"}`)
	a.Proxy.Handle(&ctx)
	return ctx.Response.StatusCode()
}

// A reload to a file whose max_connections is outside 64..65536 is refused
// with the field and the range named, and the running config stays (a
// start on such a file is refused the same way, by config.Load).
func TestReloadRefusesMaxConnectionsOutOfRange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	if err := os.WriteFile(path, []byte(reloadConfig("max_connections: 64\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, discardLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	running := a.cfg.Load()
	for _, bad := range []string{"4", "65537"} {
		if err := os.WriteFile(path, []byte(reloadConfig("max_connections: "+bad+"\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		err := a.Reload(path)
		want := "max_connections: must be 0 (half the file-descriptor limit) or between 64 and 65536 (got " + bad + ")"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reload with max_connections %s: err = %v, want one naming %q", bad, err, want)
		}
		if got := a.cfg.Load(); got != running || got.MaxConnections != 64 {
			t.Errorf("reload with max_connections %s: the running config changed (max_connections %d)", bad, got.MaxConnections)
		}
	}
}
