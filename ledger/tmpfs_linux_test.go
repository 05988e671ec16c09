//go:build linux

package ledger_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/ledger"
)

// smallTmpfs mounts a tmpfs of size bytes on a fresh directory and has the
// test unmount it; it skips the test where mounting is not allowed (not
// root, or no mount(8)).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestLedgerOnARealFullThenUnwritableDisk (adv55) runs the ledger on a real
// 64 KiB tmpfs: filled by another file, then its directory removed and a
// file put in its place, which no write can get past (ENOTDIR; root
// ignores permission bits, and a tmpfs holding an open file cannot be
// remounted read-only).
// Write never refuses a record (nothing blocks, nothing is dropped from
// the queue), the records the disk refused are counted as lost in
// llmguard_ledger_errors_total and Health, the sink's error is logged at
// most once per 10 s (not once per flush), and when the space comes back
// (the filler removed, the mount made writable) the next records are
// written and read back. TestFullDiskTornLineRepaired fakes the short
// write; this one lets the kernel refuse.
func TestLedgerOnARealFullThenUnwritableDisk(t *testing.T) {
	dir := smallTmpfs(t, "64k")
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 48<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "ledger")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "ledger.jsonl")
	reg := prometheus.NewPedanticRegistry()
	logger, logs := newLogger()
	w := mustNew(t, ledger.Options{File: path, Logger: logger, Registerer: reg, MaxSizeMB: 1})
	start := time.Now()
	next := 1
	writeSome := func(n int) {
		for i := 0; i < n; i++ {
			if !w.Write(rec(next)) {
				t.Fatalf("record %d refused by Write: the disk must not hold up the queue", next)
			}
			next++
			if next%20 == 0 {
				flush(t, w)
			}
		}
		flush(t, w)
	}

	// Step 1 (full): 400 records of about 400 bytes each into 16 KiB of room.
	writeSome(400)
	h := w.Health()
	if h.Lost == 0 || len(h.Failing) != 1 || !strings.Contains(h.LastError, "no space left") {
		t.Fatalf("step 1 (full): Health = %+v, want records lost, the file failing, ENOSPC", h)
	}
	lostFull := h.Lost
	if got := counter(t, reg, "llmguard_ledger_errors_total", "file"); uint64(got) != lostFull {
		t.Errorf("step 1 (full): errors_total{sink=file} = %v, Health.Lost %d: want them equal", got, lostFull)
	}

	// Step 2 (space back): the filler removed, the next records written.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	from := next
	writeSome(20)
	if h := w.Health(); h.Lost != lostFull || len(h.Failing) != 0 {
		t.Errorf("step 2 (space back): Health = %+v, want %d lost still and nothing failing", h, lostFull)
	}
	if !readBack(t, path, from, next) {
		t.Errorf("step 2 (space back): records %d–%d not all read back", from, next-1)
	}

	// Step 3 (unwritable): the directory gone, a file at its path, then
	// the file removed (lumberjack makes the directory again).
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSome(100)
	if h := w.Health(); h.Lost != lostFull+100 || len(h.Failing) != 1 || !strings.Contains(h.LastError, "not a directory") {
		t.Errorf("step 3 (unwritable): Health = %+v, want %d lost, the file failing, ENOTDIR", h, lostFull+100)
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	from = next
	writeSome(20)
	if h := w.Health(); len(h.Failing) != 0 {
		t.Errorf("step 3 (writable again): Health = %+v, want nothing failing", h)
	}
	if !readBack(t, path, from, next) {
		t.Errorf("step 3 (writable again): records %d–%d not all read back", from, next-1)
	}

	// 45 flushes met a full or read-only disk; one log line per 10 s.
	lines := strings.Count(logs.String(), "ledger: file sink")
	if most := 2 + int(time.Since(start)/(10*time.Second)); lines == 0 || lines > most {
		t.Errorf("%d error lines for the failing disk, want 1 to %d (one per 10 s): %s", lines, most, logs)
	}
	if d := w.Dropped(); d != 0 {
		t.Errorf("Dropped = %d, want 0: a failing disk must not fill the queue", d)
	}
}

// readBack reports whether every record numbered from to to-1 is in the
// ledger at path.
func readBack(t *testing.T, path string, from, to int) bool {
	t.Helper()
	seen := map[string]bool{}
	if _, err := ledger.ReadFile(path, func(r ledger.Record) { seen[r.RequestID] = true }); err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		if !seen[rec(i).RequestID] {
			return false
		}
	}
	return true
}
