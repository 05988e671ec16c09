package loadbench

import (
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestResumeSameEstimates weighs the load benchmark's warm conversations
// (growing, trimmed as chat frameworks trim them, JSON and SSE shapes)
// through a weigher with the count cache, whose scans resume from the
// previous turn's checkpoint, and through one without any cache: every
// estimate is the same, and most bodies resume.
func TestResumeSameEstimates(t *testing.T) {
	pool := newTextPool(1)
	warm, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	cold, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range []Shape{{Size: 1 << 10, Warm: true}, {Size: 16 << 10, Warm: true, Stream: true}, {Size: 4 << 10, Warm: true}} {
		c := newConversation(pool, shape, 11)
		before := warm.CacheStats().Resumed
		const n = 120
		for i := range n {
			body := c.next()
			if got, want := warm.Chat(body), cold.Chat(body); got != want {
				t.Fatalf("%d-byte shape, body %d: resumed %+v, fresh %+v", shape.Size, i, got, want)
			}
		}
		resumed := warm.CacheStats().Resumed - before
		t.Logf("%d bytes: %d of %d bodies resumed", shape.Size, resumed, n)
		if resumed < n/3 {
			t.Errorf("%d bytes: only %d of %d bodies resumed", shape.Size, resumed, n)
		}
	}
}
