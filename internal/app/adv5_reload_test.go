package app

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// A config file written in steps is not reloaded from a prefix: cut after
// its first limit, the file is valid with the second limit missing, and
// Watch loaded it 100 ms after the first write, the second limit off until
// the rest came (seen live: a rpm limit of 1 let every request through
// for the 1.5 s a writer paused). Watch now reloads a content only when a
// second read, a settle period later, agrees. Its timer is the test's:
// each timer Watch starts is handed over on armed, and fires when the test
// says.
func TestWatchSkipsAFileStillBeingWritten(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	config := func(limits ...string) string {
		return fmt.Sprintf(`listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: %q, no_key: true}]
keys:
  - {key: %s, user: alice, tenant: acme}
limits:
%s`, mock.URL, testKey, strings.Join(limits, ""))
	}
	tpm := "  - {name: user-tpm, scope: user, unit: tokens, rate: 100000, per: 1m}\n"
	rpm := "  - {name: user-rpm, scope: user, unit: requests, rate: 1, per: 1h}\n"
	rpd := "  - {name: user-rpd, scope: user, unit: requests, rate: 5, per: 24h}\n"
	if err := os.WriteFile(path, []byte(config(tpm, rpm)), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	limits := func() int { return len(h.app.cfg.Load().Limits) }

	// Step 1: the writer has written the first limit and pauses.
	if err := os.WriteFile(path, []byte(config(tpm)), 0o644); err != nil {
		t.Fatal(err)
	}
	(<-armed) <- time.Now() // the change seen; its timer fires
	// Another change in the directory: a watcher that reloaded the prefix
	// starts a timer for it; one still settling has one already and
	// starts one for its second read.
	if err := os.WriteFile(filepath.Join(dir, "other"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var next chan time.Time
	select {
	case next = <-armed:
	case <-time.After(20 * time.Second): // not a time asserted: a bound on a wait that never ends
		t.Fatalf("step 1: no timer started after the first read (limits in force: %d)", limits())
	}
	if n := limits(); n != 2 {
		t.Fatalf("step 1 (prefix, first read): %d limits in force, want the 2 of the running config", n)
	}
	// Step 2: the rest is written (the file now differs from the prefix).
	if err := os.WriteFile(path, []byte(config(tpm, rpm, rpd)), 0o644); err != nil {
		t.Fatal(err)
	}
	next <- time.Now() // read: not what the last read saw, so read again
	(<-armed) <- time.Now()
	for deadline := time.Now().Add(20 * time.Second); limits() != 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := limits(); n != 3 {
		t.Fatalf("step 2 (whole file, read twice): %d limits in force, want its 3", n)
	}
}
