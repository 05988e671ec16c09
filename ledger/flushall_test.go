package ledger_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
)

// TestFlushWritesEveryRecordQueuedBefore: Flush answers only when every
// record queued before it is in the file, however many are queued. Before,
// the writing goroutine drained at most one batch (4,096 records, or 100
// ms of work) on a flush request and answered with the rest still queued
// (seen under load as TestRemovedFileIsMadeAgain finding records written
// after the file was removed).
//
// Three batches' worth are queued while the goroutine is held, a Flush is
// sent and the goroutine let go; once Flush has answered, the goroutine
// stops before its next batch (at most one more gets through, in the
// instant between the answer and the Flush call's return) and the file
// is read. Five rounds, since which of the flush request and the records
// the goroutine takes first is Go's random choice.
func TestFlushWritesEveryRecordQueuedBefore(t *testing.T) {
	const n = 3*4096 + 100
	for round := range 5 {
		path := filePath(t)
		hold := make(chan struct{})
		resume := make(chan struct{})
		var answered atomic.Bool
		calls := 0
		w := mustNew(t, ledger.WithBeforeBatch(ledger.Options{File: path, Buffer: 2 * n}, func() {
			if calls++; calls == 1 {
				<-hold
			}
			if answered.Load() {
				<-resume
			}
		}))
		t.Cleanup(func() { close(resume) }) // before w.Close (cleanups run last first)
		for i := 1; i <= n; i++ {
			if !w.Write(rec(i)) {
				t.Fatalf("record %d dropped", i)
			}
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := w.Flush(ctx)
			answered.Store(true)
			done <- err
		}()
		for range 100 {
			runtime.Gosched() // let the Flush reach its send
		}
		close(hold)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := len(mustRead(t, path)); got != n {
			t.Fatalf("round %d: %d records in the file when Flush returned, want %d", round, got, n)
		}
	}
}
