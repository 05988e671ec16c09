package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/logbuf"
	"github.com/llmguard/llmguard/ledger"
)

// t0 is a fixed instant the tests' records are stamped from.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

// rec returns a record numbered i with a cost that differs per record.
func rec(i int) ledger.Record {
	return ledger.Record{
		TS:                   t0.Add(time.Duration(i) * time.Millisecond),
		RequestID:            fmt.Sprintf("req-%06d", i),
		KeyID:                "k_" + fmt.Sprint(i%7),
		User:                 []string{"alice", "bob", "carol"}[i%3],
		Tenant:               []string{"acme", "globex"}[i%2],
		Model:                []string{"gpt-4o", "claude-sonnet-4", "o3"}[i%3],
		Flavor:               "openai",
		Status:               200,
		InputTokens:          int64(100 + i%50),
		CachedInputTokens:    int64(i % 10),
		CacheWriteTokens:     int64(i % 3),
		OutputTokens:         int64(20 + i%30),
		ReasoningTokens:      int64(i % 5),
		EstimatedInputTokens: int64(90 + i%50),
		Reserved:             int64(200 + i%50),
		ReservedUnit:         "tokens",
		CostMicroUSD:         int64(1000 + i*37%9973),
	}
}

// syncBuffer is a log destination safe for concurrent use.
type syncBuffer = logbuf.Buffer

// newLogger returns a logger writing text lines to a buffer it returns.
func newLogger() (*slog.Logger, *syncBuffer) {
	b := &syncBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// filePath returns a ledger file path in a fresh temporary directory.
func filePath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ledger.jsonl")
}

// mustNew makes a Writer and has the test close it.
func mustNew(t *testing.T, o ledger.Options) *ledger.Writer {
	t.Helper()
	if o.Logger == nil {
		o.Logger, _ = newLogger()
	}
	w, err := ledger.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func flush(t *testing.T, w *ledger.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func mustRead(t *testing.T, path string) []ledger.Record {
	t.Helper()
	recs, err := ledger.ReadFiles(path)
	if err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	return recs
}
