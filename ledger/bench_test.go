package ledger_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/llmguard/llmguard/ledger"
)

// TestWriteAllocatesNothing: Write copies the record into the channel and
// allocates nothing, whether it queues or drops.
//
// AllocsPerRun counts every allocation in the process, so the writing
// goroutine is held before its first batch while Write is measured: its
// encoding would otherwise be counted against Write whenever the two
// overlap (often, on a loaded machine).
func TestWriteAllocatesNothing(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	w := mustNew(t, ledger.WithBeforeBatch(ledger.Options{File: filePath(t), Buffer: 1 << 16},
		func() { once.Do(func() { <-release }) }))
	defer close(release)
	r := rec(1)
	if n := testing.AllocsPerRun(1000, func() { w.Write(r) }); n != 0 {
		t.Errorf("Write allocates %v times per call", n)
	}
}

// BenchmarkWrite measures the request path's cost of recording (queue or
// drop: the sink encodes at its own pace).
func BenchmarkWrite(b *testing.B) {
	w, err := ledger.New(ledger.Options{File: filepath.Join(b.TempDir(), "ledger.jsonl")})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := rec(1)
	b.ReportAllocs()
	for b.Loop() {
		w.Write(r)
	}
	b.ReportMetric(float64(w.Dropped())/float64(b.N), "drops/op")
}

// BenchmarkWriteParallel is Write from every P at once, as the proxy's
// handlers call it.
func BenchmarkWriteParallel(b *testing.B) {
	w, err := ledger.New(ledger.Options{File: filepath.Join(b.TempDir(), "ledger.jsonl")})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := rec(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Write(r)
		}
	})
}
