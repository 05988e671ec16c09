package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// A reload that changes a setting read only at start-up (here
// unmetered_paths and max_body_bytes, which the proxy is built with) is
// logged as needing a restart, naming the field, and the running value
// stays; a reload of the same file warns of nothing. Before, such a reload
// logged only "config reloaded": an operator who removed an unmetered_paths
// entry believed the endpoint closed while calls went on past the token
// limits until a restart.
func TestReloadWarnsOfStartOnlySettings(t *testing.T) {
	const warning = "changes only at restart"
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(`
listen: 127.0.0.1:8
admin_listen: 127.0.0.1:9
upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-reload, user: dev, tenant: dev-team}]
limits: [{name: user-tokens, scope: user, unit: tokens, rate: 100000, per: 1h}]
`+extra), 0o644); err != nil {
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

	steps := []struct {
		name  string
		extra string
		want  []string // fields warned of; none: no warning at all
	}{
		{name: "same file", extra: "unmetered_paths: [\"/v1/images/*\"]\n"},
		{name: "unmetered_paths removed", extra: "", want: []string{"field=unmetered_paths"}},
		{name: "max_body_bytes lowered", extra: "unmetered_paths: [\"/v1/images/*\"]\nmax_body_bytes: 1024\n",
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
	}
}
