package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// A change written to the config file and then signalled (SIGHUP, as
// config management tools do after writing) is one reload: the watch,
// settling on the content SIGHUP already applied, applies and counts
// nothing more. Before, it reloaded it again:
// llmguard_config_reloads_total{result="ok"} rose by 2 for one change
// (and leases went back twice). A later change the watch alone sees is
// reloaded as before. Watch's timers are the test's.
func TestSignalledChangeReloadsOnce(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "c.yaml")
	write := func(limits ...string) {
		t.Helper()
		c := fmt.Sprintf(`listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: %q, no_key: true}]
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
%s`, mock.URL, testKey, strings.Join(limits, ""))
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tpm := "  - {name: user-tpm, scope: user, unit: tokens, rate: 100000, per: 1m}\n"
	rpm := "  - {name: user-rpm, scope: user, unit: requests, rate: 100, per: 1m}\n"
	rpd := "  - {name: user-rpd, scope: user, unit: requests, rate: 500, per: 24h}\n"
	write(tpm)
	logs := &syncBuffer{}
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(logs, nil)))
	armed := make(chan chan time.Time, 16)
	h.app.watchAfter = func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		armed <- c
		return c
	}
	stop, err := h.app.Watch(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	// settle fires every timer Watch arms until done says so; the bound is
	// on a wait that otherwise never ends, not a time asserted.
	settle := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !done(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen; logs:\n%s", what, logs.String())
			}
			select {
			case c := <-armed:
				c <- time.Now()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	oks := func(n int) bool {
		return strings.Contains(h.metrics(), fmt.Sprintf(`llmguard_config_reloads_total{result="ok"} %d`, n))
	}

	write(tpm, rpm)
	if err := h.app.Reload(path); err != nil { // the SIGHUP
		t.Fatal(err)
	}
	settle("the watch passing over the signalled change", func() bool {
		return strings.Contains(logs.String(), "not reloaded again")
	})
	if n := len(h.app.cfg.Load().Limits); n != 2 || !oks(1) {
		t.Fatalf("after one change written and signalled: %d limits, metrics:\n%s", n, grepLines(h.metrics(), "llmguard_config_reloads_total"))
	}

	write(tpm, rpm, rpd)
	// The reload stores the config a moment before it counts itself: wait
	// for both (the counter's rise is what this step asks of the watch).
	settle("the watch reloading an unsignalled change", func() bool { return len(h.app.cfg.Load().Limits) == 3 && oks(2) })
	if !oks(2) {
		t.Fatalf("after a second change, watched only: %s", grepLines(h.metrics(), "llmguard_config_reloads_total"))
	}
}
