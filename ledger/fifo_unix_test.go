//go:build unix

package ledger_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
)

// inTime runs fn and fails the test when it has not returned after 10 s:
// the failure these tests guard against is a call that never returns.
func inTime(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still blocked after 10s", what)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// TestFIFOAtTheLedgerPathIsRefused: a FIFO at ledger.file (named so, or
// put there while the writer runs) is refused without waiting for a
// reader, and read without waiting for a writer. Before (adv48), open(2)
// of the FIFO blocked forever: `serve` hung before it listened; a FIFO
// put in place of the file stopped every later record with nothing
// counted or logged (/readyz said the ledger was healthy) and held the
// shutdown until a second signal; an /admin/usage read of it never
// answered.
func TestFIFOAtTheLedgerPathIsRefused(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		path := filePath(t)
		mkfifo(t, path)
		var err error
		inTime(t, "New", func() { _, err = ledger.New(ledger.Options{File: path}) })
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("New on a FIFO: %v, want a refusal naming it not a regular file", err)
		}
	})
	t.Run("put in place of the file", func(t *testing.T) {
		path := filePath(t)
		logger, logs := newLogger()
		w, err := ledger.New(ledger.Options{File: path, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(rec(1))
		flush(t, w)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		mkfifo(t, path)
		for i := 2; i <= 4; i++ {
			w.Write(rec(i))
		}
		inTime(t, "Flush", func() { err = w.Flush(context.Background()) })
		if err != nil {
			t.Fatalf("Flush: %v", err)
		}
		h := w.Health()
		if h.Lost != 3 || !slices.Equal(h.Failing, []string{"file"}) || !strings.Contains(h.LastError, "not a regular file") {
			t.Errorf("Health with a FIFO at the path = %+v, want 3 lost, failing [file], naming the FIFO", h)
		}
		if !strings.Contains(logs.String(), "not a regular file") {
			t.Errorf("no log line names the FIFO:\n%s", logs)
		}
		// The FIFO gone, records are written to a new file again.
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		w.Write(rec(5))
		inTime(t, "Close", func() {
			if err := w.Close(); err != nil {
				t.Logf("Close: %v", err)
			}
		})
		var ids []string
		if _, err := ledger.ReadFile(path, func(r ledger.Record) { ids = append(ids, r.RequestID) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []string{"req-000005"}) {
			t.Errorf("records in the file made again = %v, want [req-000005]", ids)
		}
	})
	t.Run("read", func(t *testing.T) {
		path := filePath(t)
		mkfifo(t, path)
		var err error
		inTime(t, "ReadFileContext", func() {
			_, err = ledger.ReadFileContext(context.Background(), path, func(ledger.Record) {})
		})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("ReadFileContext of a FIFO: %v, want a refusal", err)
		}
	})
}
