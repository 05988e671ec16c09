package weigher

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMergeScratchOfALongPieceNotPooled: heapMerge's scratch (a node per
// byte of the piece and a candidate per pair, 20 bytes a byte) went back
// to mergePool whatever the piece's length below 64 Ki candidates: one
// count of a 30,000-letter run (a base64 blob, a run of one letter in an
// answer counted as it passes) left 0.6 MiB pooled, kept across one
// collection (sync.Pool's victim cache) and reused by nothing of ordinary
// size; many counting goroutines at once left one each (tier33: the heap
// of TestCountedAnswersShareABudget). A scratch grown past
// maxPooledMergeBytes of piece is now dropped. Measured in heap bytes
// after one collection, against the same before the count.
func TestMergeScratchOfALongPieceNotPooled(t *testing.T) {
	c := testWeigher(t).encoders[EncodingO200k].(*bpeCounter)
	p := strings.Repeat("x", 30000)
	c.heapMerge(p) // warm: anything else the count allocates once
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // the warm count's scratch, if pooled, is gone
	runtime.ReadMemStats(&before)
	if n := c.heapMerge(p); n <= 0 {
		t.Fatalf("heapMerge = %d", n)
	}
	runtime.GC() // a pooled scratch survives one collection
	runtime.ReadMemStats(&after)
	if held := int64(after.HeapInuse) - int64(before.HeapInuse); held > 256<<10 {
		t.Errorf("the heap held %d KiB more after a 30,000-byte piece was counted, want at most 256 KiB (its scratch pooled?)", held>>10)
	}
}

// BenchmarkHeapMergeLong: the merge of a 16 KiB run of random letters,
// past maxPooledMergeBytes (its scratch allocated anew each time), and of
// a 4 KiB one (pooled): the A/B of the cap against the build before it.
func BenchmarkHeapMergeLong(b *testing.B) {
	w, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := w.encoders[EncodingO200k].(*bpeCounter)
	r := rand.New(rand.NewPCG(33, 33))
	for _, n := range []int{4 << 10, 16 << 10} {
		var s strings.Builder
		for s.Len() < n {
			s.WriteByte(byte('a' + r.IntN(26)))
		}
		p := s.String()
		b.Run(strconv.Itoa(n>>10)+"KiB", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.heapMerge(p)
			}
		})
	}
}
