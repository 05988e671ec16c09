package ledger_test

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/ledger"
)

// fillingDisk passes writes to the file until room bytes are used, then
// writes what still fits and fails with ENOSPC, as write(2) does on a
// full disk (a short write, then the error). Safe for concurrent use.
type fillingDisk struct {
	mu   sync.Mutex
	w    io.Writer
	room int
}

func (d *fillingDisk) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(p) <= d.room {
		d.room -= len(p)
		return d.w.Write(p)
	}
	n, err := d.w.Write(p[:d.room])
	d.room -= n
	if err == nil {
		err = syscall.ENOSPC
	}
	return n, err
}

func (d *fillingDisk) free(n int) {
	d.mu.Lock()
	d.room += n
	d.mu.Unlock()
}

// TestFullDiskTornLineRepaired: a disk that fills part way through a
// record leaves the file ending mid-line; once space is back, the next
// record starts on a line of its own. Only the records that met the full
// disk are lost (and counted as errors), not the first one after it, which
// was glued to the torn line and unreadable (seen on a 256 KiB tmpfs:
// usage --json said unreadable_lines 1 and one request short).
func TestFullDiskTornLineRepaired(t *testing.T) {
	path := filePath(t)
	reg := prometheus.NewPedanticRegistry()
	line, _ := json.Marshal(rec(1))
	disk := &fillingDisk{room: len(line) + 1 + 40} // rec 1 whole, 40 bytes of rec 2
	w := mustNew(t, ledger.WithFileWriter(ledger.Options{File: path, Registerer: reg},
		func(f io.Writer) io.Writer { disk.w = f; return disk }))
	for i := 1; i <= 3; i++ {
		w.Write(rec(i))
	}
	flush(t, w) // rec 2 torn, rec 3 refused: the disk is full
	if h := w.Health(); h.Lost != 2 || !slices.Equal(h.Failing, []string{"file"}) || !strings.Contains(h.LastError, "no space left") {
		t.Errorf("Health on the full disk = %+v, want 2 lost, failing [file], the full disk's error", h)
	}
	disk.free(1 << 20)
	w.Write(rec(4))
	w.Write(rec(5))
	flush(t, w)
	if h := w.Health(); h.Lost != 2 || len(h.Failing) != 0 || h.LastError == "" {
		t.Errorf("Health once space is back = %+v, want 2 lost, none failing, the last error kept", h)
	}
	if err := w.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err) // the full disk's error is reported by Close
	}
	var ids []string
	bad, err := ledger.ReadFile(path, func(r ledger.Record) { ids = append(ids, r.RequestID) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"req-000001", "req-000004", "req-000005"}; !slices.Equal(ids, want) || bad != 1 {
		t.Errorf("read %v with %d bad lines, want %v and 1 (rec 2's torn line)", ids, bad, want)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "file"); got != 3 {
		t.Errorf("records_total{sink=file} = %v, want 3 (records 1, 4, 5)", got)
	}
	if got := counter(t, reg, "llmguard_ledger_errors_total", "file"); got != 2 {
		t.Errorf("errors_total{sink=file} = %v, want 2 (records 2, 3)", got)
	}
}
