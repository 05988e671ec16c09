package ledger_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
)

// TestRotationKeepsEveryRecord rotates every few KiB: every record is in
// exactly one file, whole, in order, and ReadFiles finds them all.
func TestRotationKeepsEveryRecord(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[compress], func(t *testing.T) {
			const n, maxBytes = 3000, 8 << 10
			path := filePath(t)
			w := mustNew(t, ledger.WithMaxBytes(ledger.Options{File: path, Compress: compress}, maxBytes))
			for i := range n {
				w.Write(rec(i))
				if i%500 == 0 {
					flush(t, w) // small batches as well as large ones
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if compress { // lumberjack compresses backups in the background
				waitFor(t, func() bool {
					plain, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "ledger-*.jsonl"))
					gz, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "ledger-*.jsonl.gz"))
					return len(plain) == 0 && len(gz) > 0
				})
			}
			files, err := ledger.Files(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) < 10 {
				t.Fatalf("%d files for %d records of ~400 B rotated at %d B: %v", len(files), n, maxBytes, files)
			}
			if files[len(files)-1] != path {
				t.Errorf("last file is %s, want the current %s", files[len(files)-1], path)
			}
			for _, f := range files {
				if st, err := os.Stat(f); err == nil && !strings.HasSuffix(f, ".gz") && st.Size() > maxBytes {
					t.Errorf("%s is %d B, over %d", f, st.Size(), maxBytes)
				}
				bad, err := ledger.ReadFile(f, func(ledger.Record) {})
				if err != nil || bad != 0 {
					t.Errorf("%s: %d bad lines, err %v (a record split by rotation?)", f, bad, err)
				}
			}
			recs := mustRead(t, path)
			if len(recs) != n {
				t.Fatalf("ReadFiles found %d records in %d files, want %d", len(recs), len(files), n)
			}
			for i, r := range recs {
				if r != rec(i) {
					t.Fatalf("record %d = %+v, want %+v", i, r, rec(i))
				}
			}
		})
	}
}

// waitFor polls cond until it holds. The bound only stops a test that
// would hang: it is not a timing assertion (lumberjack compresses backups
// on a goroutine of its own, which a loaded machine running -race may not
// schedule for seconds; one run took over 10 s).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	const limit = 2 * time.Minute
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met in %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFilesOrderAndNames lists backups oldest first, then the current
// file; prefers a plain backup to its half-written .gz; ignores other files.
func TestFilesOrderAndNames(t *testing.T) {
	dir := t.TempDir()
	line := func(i int) []byte { b, _ := json.Marshal(rec(i)); return append(b, '\n') }
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	files := map[string][]byte{
		"ledger-2025-03-14T10-00-00.000.jsonl":    line(1),
		"ledger-2025-03-14T11-00-00.000.jsonl.gz": gz(line(2)),
		"ledger-2025-03-14T12-00-00.000.jsonl":    line(3),
		"ledger-2025-03-14T12-00-00.000.jsonl.gz": gz(line(3))[:10], // being compressed
		"ledger.jsonl":                        line(4),
		"ledger-notatime.jsonl":               line(90),
		"other-2025-03-14T10-00-00.000.jsonl": line(91),
		"ledger-2025-03-14T10-00-00.000.log":  line(92),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "ledger.jsonl")
	got, err := ledger.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "ledger-2025-03-14T10-00-00.000.jsonl"),
		filepath.Join(dir, "ledger-2025-03-14T11-00-00.000.jsonl.gz"),
		filepath.Join(dir, "ledger-2025-03-14T12-00-00.000.jsonl"),
		path,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Files = %v\nwant %v", got, want)
	}
	recs := mustRead(t, path)
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.RequestID)
	}
	if w := []string{"req-000001", "req-000002", "req-000003", "req-000004"}; !slices.Equal(ids, w) {
		t.Errorf("ReadFiles ids = %v, want %v", ids, w)
	}

	if _, err := ledger.ReadFiles(filepath.Join(dir, "none.jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFiles of a missing ledger = %v, want fs.ErrNotExist", err)
	}
}

// TestReadLinesTolerant skips garbage, blank and torn lines and keeps the
// records around them.
func TestReadLinesTolerant(t *testing.T) {
	good := func(i int) string { b, _ := json.Marshal(rec(i)); return string(b) }
	long := `{"ts":"2025-03-14T00:00:00Z","user":"` + strings.Repeat("x", ledger.MaxLine) + `"}`
	for _, tc := range []struct {
		name    string
		in      string
		wantIDs []string
		wantBad int
	}{
		{name: "empty", in: ""},
		{name: "one, no newline", in: good(1), wantIDs: []string{"req-000001"}},
		{name: "torn last line", in: good(1) + "\n" + good(2)[:50], wantIDs: []string{"req-000001"}, wantBad: 1},
		{name: "garbage between", in: good(1) + "\n\x00\xff garbage\n\n  \n" + good(2) + "\n", wantIDs: []string{"req-000001", "req-000002"}, wantBad: 1},
		{name: "json but no ts", in: "{}\nnull\n[1]\n" + `{"ts":"yesterday"}` + "\n" + good(3), wantIDs: []string{"req-000003"}, wantBad: 4},
		{name: "CRLF", in: good(1) + "\r\n" + good(2) + "\r\n", wantIDs: []string{"req-000001", "req-000002"}},
		{name: "over MaxLine", in: good(1) + "\n" + long + "\n" + good(2) + "\n", wantIDs: []string{"req-000001", "req-000002"}, wantBad: 1},
		{name: "long but under MaxLine", in: `{"ts":"2025-03-14T00:00:00Z","request_id":"big","user":"` + strings.Repeat("y", 200<<10) + "\"}\n", wantIDs: []string{"big"}},
	} {
		var ids []string
		bad, err := ledger.ReadLines(strings.NewReader(tc.in), func(r ledger.Record) { ids = append(ids, r.RequestID) })
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ids, tc.wantIDs) || bad != tc.wantBad {
			t.Errorf("%s: ids %v, bad %d; want %v, %d", tc.name, ids, bad, tc.wantIDs, tc.wantBad)
		}
	}
}

// FuzzReadLines: any input is read without panic, yields no more records
// than lines, and garbage never swallows the record on the next line.
func FuzzReadLines(f *testing.F) {
	good, _ := json.Marshal(rec(7))
	f.Add(good)
	f.Add(good[:30])
	f.Add([]byte("{}\n{\"ts\":\n\x00\xff"))
	f.Add([]byte(`{"ts":"2025-03-14T00:00:00Z","status":"x"}`))
	f.Add(bytes.Repeat([]byte("{"), 70<<10))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		bad, err := ledger.ReadLines(bytes.NewReader(data), func(r ledger.Record) {
			n++
			if r.TS.IsZero() {
				t.Errorf("record without ts: %+v", r)
			}
		})
		if err != nil {
			t.Fatalf("ReadLines: %v", err)
		}
		if lines := bytes.Count(data, []byte("\n")) + 1; n+bad > lines {
			t.Errorf("%d records and %d bad lines from %d lines", n, bad, lines)
		}
		var last ledger.Record
		in := append(append(bytes.Clone(data), '\n'), good...)
		if _, err := ledger.ReadLines(bytes.NewReader(in), func(r ledger.Record) { last = r }); err != nil {
			t.Fatal(err)
		}
		if last != rec(7) {
			t.Errorf("record after the input = %+v, want %+v", last, rec(7))
		}
	})
}
