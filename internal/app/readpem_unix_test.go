//go:build unix

package app

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadPEMRefusesFIFO: a certificate file replaced by a FIFO used to
// block the certificate watcher in open(2) for good — no renewal was read
// again, and SIGTERM's Close waited for the watcher forever.
func TestReadPEMRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "tls.crt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := readPEM(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("readPEM(FIFO): %v, want a refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("readPEM(FIFO) still blocked after 10s")
	}
}
