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

	// text is the streamed output text, counted only as far as it must be
	// (see newUsageTap).
	text pendingText

	sc  sse.Scanner
	out []byte
	// unread: some of the stream's data was relayed without being read (an
	// event over sse.MaxEventBytes, one the upstream never finished, or one
	// the weigher could not read: weigher.StreamUpdate.Unread), so the text
	// counted is not all the stream carried.
	unread bool
}

// newUsageTap returns a tap reading stream, dropping usage-only chunks when
// strip is set, and counting the streamed text with count (nil: counting
// nothing, for tests of the relay alone). A stream expected to report its
// usage (expectUsage: a Messages or Responses stream, or a chat or
// completions stream whose request asks for include_usage) is not counted
// unless its usage never arrives: it holds its text uncounted up to
// tapTextMax bytes and counts only what overflows that. Any other stream is
// counted as it goes, every tapCountEvery bytes. Either way the text held is
// at most tapTextMax bytes.
func newUsageTap(stream weigher.Stream, strip, expectUsage bool, count func(text string) int64) usageTap {
	t := usageTap{stream: stream, strip: strip, text: pendingText{count: count, countAt: tapTextMax}}
	if !expectUsage {
		t.text.countAt = tapCountEvery
	}
	return t
}

// settle is what the stream cost (see weigher.Stream.Settle): the usage the
// upstream reported when it arrived, its streamed text uncounted; otherwise
// with the output counted locally.
func (t *usageTap) settle(est weigher.Estimate) (weigher.Usage, weigher.Source) {
	if t.stream.Usage().Final {
		return t.stream.Settle(est, 0) // the reported usage: the count is not read
	}
	return t.stream.Settle(est, t.text.tokens())
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
	if ev.Truncated {
		t.unread = true
	}
	if ev.HasData && !ev.Truncated {
		u := t.stream.Event(ev.Type, ev.Data)
		t.unread = t.unread || u.Unread || u.Uncounted
		t.text.add(u.Text)
		keep = !(t.strip && u.UsageOnly)
	}
	if t.strip && keep {
		t.out = append(t.out, raw...)
	}
}
