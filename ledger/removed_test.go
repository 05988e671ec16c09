package ledger_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/ledger"
)

// TestRemovedFileIsMadeAgain: a ledger file removed while the writer runs
// (an operator's rm, a cleanup job, logrotate's move without copytruncate)
// is made again at its path by the next flush, and the records after the
// removal are read back from it. Before, lumberjack kept writing to the
// open descriptor of the unlinked file: every later record was counted as
// written (llmguard_ledger_records_total) and lost, with nothing logged,
// until a rotation 100 MiB later; a moved file kept growing under its new
// name, outside what ReadFiles reads.
func TestRemovedFileIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, path string)
	}{
		{name: "removed", remove: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "moved", remove: func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replaced", remove: func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil { // logrotate's create
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filePath(t)
			logger, logs := newLogger()
			w := mustNew(t, ledger.Options{File: path, Logger: logger, MaxSizeMB: 1})
			for i := 1; i <= 4000; i++ { // past 1 MiB: a rotation is no removal
				w.Write(rec(i))
			}
			flush(t, w)
			w.Write(rec(4001))
			flush(t, w)
			if b, _ := filepath.Glob(strings.TrimSuffix(path, ".jsonl") + "-*"); len(b) == 0 {
				t.Fatal("no rotation in 4,000 records")
			}
			if n := strings.Count(logs.String(), "removed or moved"); n != 0 {
				t.Fatalf("%d warnings of a removal before any, want 0: %s", n, logs)
			}
			tc.remove(t, path)
			w.Write(rec(5001))
			flush(t, w)
			w.Write(rec(5002))
			flush(t, w)
			var ids []string
			if _, err := ledger.ReadFile(path, func(r ledger.Record) { ids = append(ids, r.RequestID) }); err != nil {
				t.Fatal(err)
			}
			if want := []string{"req-005001", "req-005002"}; !slices.Equal(ids, want) {
				t.Errorf("%s read after the file was %s: %v, want %v", path, tc.name, ids, want)
			}
			if h := w.Health(); h.Lost != 0 || len(h.Failing) != 0 {
				t.Errorf("Health = %+v, want nothing lost or failing", h)
			}
			if n := strings.Count(logs.String(), "removed or moved"); n != 1 {
				t.Errorf("%d warnings of the removal, want 1: %s", n, logs)
			}
		})
	}
}
