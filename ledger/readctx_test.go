package ledger_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmguard/llmguard/ledger"
)

// A read whose context ends stops within the 64 KiB it is reading, plain
// or gunzipped, and says why: a usage read whose caller left scanned the
// whole ledger (hundreds of MB) all the same.
func TestReadFileContextStops(t *testing.T) {
	const records = 20_000 // about 3 MB: some 45 reads of 64 KiB
	var b bytes.Buffer
	for i := range records {
		fmt.Fprintf(&b, `{"ts":"2026-12-01T00:00:00Z","request_id":"r-%d","key_id":"k","user":"u","tenant":"t","model":"m","flavor":"openai","status":200,"input_tokens":1,"output_tokens":1,"cost_micro_usd":1}`+"\n", i)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(plain, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b.Bytes())
	zw.Close()
	packed := filepath.Join(dir, "ledger-1.jsonl.gz")
	if err := os.WriteFile(packed, z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{plain, packed} {
		ctx, cancel := context.WithCancel(context.Background())
		got := 0
		_, err := ledger.ReadFileContext(ctx, name, func(ledger.Record) {
			got++
			if got == 1 {
				cancel() // the caller leaves after the first record
			}
		})
		cancel()
		if !errors.Is(err, context.Canceled) || got >= records/2 {
			t.Errorf("%s: %d of %d records read after the context ended, err %v; want at most a buffer's worth and context.Canceled",
				filepath.Base(name), got, records, err)
		}
		// Not cancelled: every record.
		got = 0
		if _, err := ledger.ReadFileContext(context.Background(), name, func(ledger.Record) { got++ }); err != nil || got != records {
			t.Errorf("%s: %d records, err %v; want %d", filepath.Base(name), got, err, records)
		}
	}
}
