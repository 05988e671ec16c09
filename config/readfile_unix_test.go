//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileRefusesWhatIsNotASmallRegularFile: a config path replaced by
// a FIFO used to block os.ReadFile until a writer came (forever): the
// reload held the signal loop, so SIGTERM went unanswered, and the watcher
// held the shutdown. A huge file was read whole (a 700 MB config took the
// process past 6 GB). Each is now refused at once.
func TestReadFileRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "llmguard.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", 600)), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{{fifo, "not a regular file"}, {dir, "not a regular file"}, {big, "larger than 1000"}, {"/dev/zero", "not a regular file"}} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(c.path, 1000); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadFile(%s): %v, want an error saying %q", c.path, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadFile(%s) still blocked after 10s", c.path)
		}
	}
	if b, err := ReadFile(ok, 1000); err != nil || string(b) != "listen: 127.0.0.1:1\n" {
		t.Errorf("ReadFile(regular file): %q, %v", b, err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Load(FIFO): no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Load(FIFO) still blocked after 10s")
	}
}
