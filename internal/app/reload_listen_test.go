package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// A node started with `serve --listen` and `--admin-listen` (App's
// ListenOverride, AdminListenOverride) reloads an unchanged file without
// being told that listen and admin_listen "change only at restart": the
// file's addresses are not the ones it runs on, and the flags still hold.
// Without the overrides, a file whose listen moved is still warned of.
func TestReloadKeepsCommandLineListeners(t *testing.T) {
	const warning = "changes only at restart"
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	write := func(listen string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(`
listen: `+listen+`
admin_listen: 127.0.0.1:9
upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-reload, user: dev, tenant: dev-team}]
limits: [{name: user-rpm, scope: user, unit: requests, rate: 60, per: 1m}]
`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := func(listen, admin string) (*App, *syncBuffer) {
		t.Helper()
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if listen != "" {
			cfg.Listen = listen // as serve does with its flags
		}
		if admin != "" {
			cfg.AdminListen = admin
		}
		logs := &syncBuffer{}
		a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		a.ListenOverride, a.AdminListenOverride = listen, admin
		return a, logs
	}

	write("127.0.0.1:8")
	a, logs := start("127.0.0.1:28080", "127.0.0.1:29090")
	for step, listen := range []string{"127.0.0.1:8", "127.0.0.1:7"} {
		write(listen)
		if err := a.Reload(path); err != nil {
			t.Fatalf("step %d (file listen %s): reload: %v", step, listen, err)
		}
		if strings.Contains(logs.String(), warning) {
			t.Errorf("step %d (file listen %s): a node on --listen was warned of its listeners:\n%s", step, listen, logs)
		}
		if c := a.cfg.Load(); c.Listen != "127.0.0.1:28080" || c.AdminListen != "127.0.0.1:29090" {
			t.Errorf("step %d: config in force listens on %s, admin %s; want the command line's", step, c.Listen, c.AdminListen)
		}
	}

	// The control: no flags, and the file's listen moves.
	write("127.0.0.1:8")
	b, logs := start("", "")
	write("127.0.0.1:7")
	if err := b.Reload(path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), warning) || !strings.Contains(logs.String(), "field=listen") {
		t.Errorf("a moved listen was not warned of:\n%s", logs)
	}
}
