package proxy

import (
	"github.com/llmguard/llmguard/sse"
	"github.com/llmguard/llmguard/weigher"
)

// usageTap reads usage from an SSE stream as it passes through. It forwards
// the upstream's bytes untouched, except that with strip set it drops the
// usage-only chunk llmguard asked for on the client's behalf. Not safe for
// concurrent use.
type usageTap struct {
	stream weigher.Stream // reads the kind's events
	strip  bool           // drop usage-only chunks (and hold bytes until events end)

	sc   sse.Scanner
	out  []byte
	text []byte // streamed output text, for local counting
}

// feed consumes one upstream read and returns the bytes to send the client
// now. The result is valid until the next call.
func (t *usageTap) feed(p []byte) []byte {
	t.out = t.out[:0]
	t.sc.Feed(p, t.onEvent)
	if !t.strip {
		return p
	}
	return t.out
}

// end returns the bytes still held at the end of the stream (an event the
// upstream never finished), to be sent as they are.
func (t *usageTap) end() []byte {
	if !t.strip {
		return nil // already sent by feed
	}
	return t.sc.Buffered()
}

func (t *usageTap) onEvent(raw []byte, ev sse.Event) {
	keep := true
	if ev.HasData && !ev.Truncated {
		u := t.stream.Event(ev.Type, ev.Data)
		t.text = append(t.text, u.Text...)
		keep = !(t.strip && u.UsageOnly)
	}
	if t.strip && keep {
		t.out = append(t.out, raw...)
	}
}
