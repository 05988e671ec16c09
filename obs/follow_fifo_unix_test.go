//go:build unix

package obs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAccessLogRefusesAFIFO: a FIFO at the access log's path, named so at
// start or put in place of the file while llmguard runs, is refused
// without waiting for a reader, and the log goes on in a file once one is
// there again. Before (adv48), the write that reopened the path blocked
// in open(2) forever holding the log's lock: every proxied request then
// hung at its access line.
func TestAccessLogRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.log")
	path := filepath.Join(dir, "access.log")
	inTime := func(what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Open the FIFOs' read ends, so that the blocked open returns
			// and the test can end (its deferred close takes the log's lock).
			for _, p := range []string{fifo, path} {
				if r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					defer r.Close()
				}
			}
			<-done
			t.Fatalf("%s still blocked after 10s", what)
		}
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var err error
	inTime("OpenOutput", func() { _, _, err = OpenOutput(fifo, 1, 0) })
	if err == nil {
		t.Error("OpenOutput(FIFO): no error")
	}

	w, closeW, err := OpenOutput(path, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeW()
	f := w.(*followingFile)
	now := time.Unix(1_700_000_000, 0)
	f.now = func() time.Time { return now }
	if _, err := w.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(followEvery)
	inTime("Write", func() { _, err = w.Write([]byte("two\n")) })
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Write with a FIFO at the path: %v, want a refusal", err)
	}
	inTime("Write", func() { _, err = w.Write([]byte("three\n")) })
	if err == nil {
		t.Error("second Write with a FIFO at the path: no error")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("four\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "four\n" {
		t.Errorf("the file made again holds %q (%v), want \"four\\n\"", got, err)
	}
}
