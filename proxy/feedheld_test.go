package proxy

import (
	"bytes"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestFeedHeldBoundsAnUnfinishedEvent: a held stream body ending in an
// unfinished event of 8 MiB is read (settleHeldStream) with the scanner's
// buffers taken from the answer budget, here 1 MiB: the scanner holds
// about what the budget allowed, not the event's 8 MiB, the event is
// unread (so the output reservation stands), and the budget is whole
// again once released.
func TestFeedHeldBoundsAnUnfinishedEvent(t *testing.T) {
	const budget = 1 << 20
	p := &Proxy{}
	p.answers.max = budget
	body := append([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: "), bytes.Repeat([]byte("x"), 8<<20)...)
	tap := newUsageTap(weigher.NewStream(weigher.KindChat), false, true, func(s string) int64 { return int64(len(s)) })
	mem := decoderMemory{p: p}
	feedHeld(&tap, body, &mem)
	if held := len(tap.sc.Buffered()); held > budget+2*readChunk {
		t.Errorf("the scanner holds %d bytes of an unfinished 8 MiB event, want at most about the %d-byte budget", held, budget)
	}
	if h := p.answers.held.Load(); h > budget {
		t.Errorf("%d bytes taken of a %d-byte budget", h, budget)
	}
	if !tap.unread {
		t.Error("an event relayed in truncated pieces is not marked unread")
	}
	mem.release()
	if h := p.answers.held.Load(); h != 0 {
		t.Errorf("%d bytes still held after release", h)
	}
}
