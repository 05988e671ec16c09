package proxy

import (
	"bytes"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestAdv55TapTakesWhatItHolds (adv55): a stripping tap (llmguard asked
// for the usage chunk on the client's behalf) fed one finished 4 MiB
// event, then small ones, holds the scanner's buffers at their grown
// capacity and, while the event is sent, its copy in out. What it takes
// from max_inflight_response_bytes must cover what it holds after every
// read: before, it took twice the pending event's raw size, so a finished
// event's copy and append's slack went uncounted, and eight gzip bombs of
// one 64 MiB event each (held up to the 16 MiB event limit) grew the heap
// by 566 MiB under a 256 MiB budget (344 MiB now; hostile-input.md, adv55).
func TestAdv55TapTakesWhatItHolds(t *testing.T) {
	p := &Proxy{}
	p.answers.max = 1 << 30
	ev := append(append([]byte(`data: {"choices":[{"index":0,"delta":{"content":"`), bytes.Repeat([]byte("a"), 4<<20)...), "\"}}]}\n\n"...)
	small := []byte(`data: {"choices":[{"index":0,"delta":{"content":"b"}}]}` + "\n\n")
	body := append(ev, bytes.Repeat(small, 2000)...)
	tap := newUsageTap(weigher.NewStream(weigher.KindChat), true, false, func(s string) int64 { return int64(len(s)) })
	tap.mem = &decoderMemory{p: p}
	most := int64(0)
	for i := 0; len(body) > 0; i++ {
		n := min(len(body), readChunk)
		tap.feed(body[:n])
		body = body[n:]
		held := int64(tap.sc.HeldBytes() + cap(tap.out))
		most = max(most, held)
		if held > tapEventFree && tap.eventHeld < held {
			t.Fatalf("read %d: the tap holds %d bytes (scanner %d, out %d) and took %d from the budget", i, held, tap.sc.HeldBytes(), cap(tap.out), tap.eventHeld)
		}
	}
	if most < 8<<20 {
		t.Fatalf("the tap held at most %d bytes: the 4 MiB event was never held with its copy", most)
	}
	if cap(tap.out) > tapEventFree {
		t.Errorf("out keeps %d bytes after the large event was sent", cap(tap.out))
	}
	tap.mem.release()
}
