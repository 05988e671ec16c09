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
	// textEvents is the number of events that carried output text: each
	// is at least one token the upstream generated (a model streams a
	// token or more an event), however its concatenation tokenizes
	// again ("a" sent 3,000 times is some 375 tokens of text, 3,000
	// tokens generated). A floor of the output counted.
	textEvents int64

	sc  sse.Scanner
	out []byte
	// unread: some of the stream's data was relayed without being read (an
	// event over sse.MaxEventBytes, one the upstream never finished, or one
	// the weigher could not read: weigher.StreamUpdate.Unread), so the text
	// counted is not all the stream carried.
	unread bool
	// unreadData: an event's data was relayed without being read (over
	// sse.MaxEventBytes, or one the weigher could not read: garbage,
	// nested too deep), so a final usage beside it is not taken below
	// the output reservation (settle).
	unreadData bool
	// cut: the stream ended before the upstream's end because its client
	// left (or was cut as a slow reader); settleStream then charges at
	// least the output reservation unless a usage or a refund decides.
	cut bool
	// mem, when set, is where an event's buffers past tapEventFree bytes
	// are taken from (the answer budget; see bound); nil: the scanner's own
	// limit alone (tests of the tap).
	mem *decoderMemory
	// eventHeld is what the tap took of mem for the scanner's buffers.
	eventHeld int64
	// truncated reads the service tier and the usage of the events
	// passed unread in Truncated pieces (a Responses response.completed
	// that repeats a long output, once the answer budget is full), which
	// the stream reader never sees: their tier joins the stream's
	// (settle), their usage is read as the stream's (unreadUsage).
	truncated topUsage
}

// tapEventFree is the raw size, in bytes, of a pending SSE event a stream
// holds without taking from the answer budget: a delta is a few hundred
// bytes, a Responses response.completed (which repeats the whole output)
// tens of KiB. Past it the scanner's buffers (the raw event and its data,
// each up to sse.DefaultMaxEventBytes) are taken from
// max_inflight_response_bytes as they grow, tapEventStep at a time; an
// event that finds no room is relayed unread from there on (Truncated), so
// that many streams each holding an unfinished 16 MiB event cannot hold
// memory without bound.
const tapEventFree = 64 << 10

// tapEventStep is the granularity, in bytes of raw event, of what a tap
// takes from the budget for its scanner's buffers.
const tapEventStep = 256 << 10

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
// with the output counted locally, at least one token for each event that
// carried text (textEvents). A final usage reporting 0 output tokens
// (a valid usage: an answer stopped at once, or by a content filter) after
// text was streamed is charged at least that text, counted, and settled as
// SourcePartial: a lenient upstream cannot stream text for free by
// reporting 0. Nor by reporting a small output beside much text: a
// stream whose text is longer than weigher.OutputCheckBytes allows for
// the output reported, or whose text came in more events than that
// output has tokens (each is a token or more), is charged at least its
// text, counted, and so settled; any other usage is the bill, its text
// uncounted — unless an event's data was relayed unread (unreadData:
// too large to scan, garbage, nested too deep), which may hold any
// amount of output: a usage reporting less output than reserved
// (est.OutputTokens) is then charged the reservation, and so settled, as
// unread output without a usage is (settleStream), and at least the web
// searches, file searches and image tokens reserved (which the output
// items of a Responses terminal event show, not its usage). The tier settled is
// the one the stream's events name, joined with any that events passed
// unread name (truncated).
func (t *usageTap) settle(est weigher.Estimate) (weigher.Usage, weigher.Source) {
	u, source := t.settleRead(est)
	u.ServiceTier = weigher.JoinServedTiers(u.ServiceTier, t.truncated.tier)
	return u, source
}

// settleRead is settle without the tier of the events passed unread.
func (t *usageTap) settleRead(est weigher.Estimate) (weigher.Usage, weigher.Source) {
	if t.stream.Usage().Final {
		u, source := t.stream.Settle(est, 0) // the reported usage: the count is not read
		if u.OutputTokens == 0 || t.text.added > weigher.OutputCheckBytes(u.OutputTokens) || t.textEvents > u.OutputTokens {
			if n := t.text.tokens(); n > u.OutputTokens {
				u.OutputTokens, source = n, weigher.SourcePartial
			}
		}
		if t.unreadData && u.OutputTokens < est.OutputTokens {
			u.OutputTokens, source = est.OutputTokens, weigher.SourcePartial
		}
		if t.unreadData {
			// The per-call fees a Responses terminal event's output
			// shows (its web_search_call, file_search_call and
			// image_generation_call items) may have been in the
			// data unread: the reserved ones stand.
			u.WebSearches = max(u.WebSearches, est.WebSearches)
			u.FileSearches = max(u.FileSearches, int64(est.FileSearches))
			u.ImageTokens = max(u.ImageTokens, est.ImageTokens)
		}
		return u, source
	}
	return t.stream.Settle(est, max(t.text.tokens(), t.textEvents))
}

// feed consumes one upstream read and returns the bytes to send the client
// now. The result is valid until the next call.
func (t *usageTap) feed(p []byte) []byte {
	if cap(t.out) > tapEventFree {
		// A large event's copy, sent by now: not kept for the stream's
		// life (what bound took for it stays taken until the end).
		t.out = nil
	}
	t.out = t.out[:0]
	t.sc.Feed(p, t.onEvent)
	t.bound()
	if !t.strip {
		return p
	}
	return t.out
}

// bound takes from t.mem what the tap holds for the event pending now,
// when it is over tapEventFree: at least twice its raw size (the raw bytes
// and the data parsed from them), and at least what the scanner's buffers
// and the tap's output buffer hold (their capacity: append's slack, and
// with strip set the copy of a finished event's raw bytes in out), rounded
// up to tapEventStep. When the budget has no room, the scanner's limit is
// lowered to the bytes it holds, so that the event is passed on in
// Truncated pieces from the next feed (the stream is then unread), and it
// holds no more than now (and one read more, at most readChunk) until the
// stream ends.
func (t *usageTap) bound() {
	n := len(t.sc.Buffered())
	held := int64(t.sc.HeldBytes() + cap(t.out))
	if t.mem == nil || max(int64(n), held) <= tapEventFree {
		return
	}
	want := max(2*int64(n), held)
	want = (want + tapEventStep - 1) / tapEventStep * tapEventStep
	if want <= t.eventHeld {
		return
	}
	if t.mem.take(want - t.eventHeld) {
		t.eventHeld = want
		return
	}
	// At least what the scanner counted of the event: a lower limit
	// would leave it a negative room.
	t.sc.MaxEventBytes = max(n, sse.MinMaxEventBytes)
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
		t.unread, t.unreadData = true, true
		t.truncated.scan(raw, t.unreadUsage)
		if !ev.Partial { // the event's last piece: the next starts afresh
			t.truncated = topUsage{tier: t.truncated.tier}
		}
	} else if ev.Stray {
		// Bytes the client got that no field the tap reads carried (a
		// misspelled "data", a JSON answer labelled text/event-stream,
		// with or without data lines around them): unread, and the
		// event's raw bytes counted as text (an upper bound of the output
		// they may hold).
		t.unread = true
		t.text.add(string(raw))
	}
	if ev.HasData && !ev.Truncated {
		u := t.stream.Event(ev.Type, ev.Data)
		t.unread = t.unread || u.Unread || u.Uncounted
		t.unreadData = t.unreadData || u.Unread
		t.text.add(u.Text)
		if u.Text != "" {
			t.textEvents++
		}
		keep = !(t.strip && u.UsageOnly)
	}
	if t.strip && keep {
		t.out = append(t.out, raw...)
	}
}

// unreadUsage takes val, a usage an event passed unread holds (a
// top-level "usage", a Responses terminal event's response.usage, found
// by the bounded scan of its pieces, topUsage), as the stream's
// (weigher.Stream.UnreadUsage): ignored, a lenient upstream's
// response.completed grown past the event limit (or the answer budget)
// settled a stream of 50,000 reasoning tokens at its output reservation
// (TestTapTruncatedEventUsage). The event stays unread (unreadData): the
// usage is charged at least the output reservation, and its text as any
// final usage's is checked (settle).
func (t *usageTap) unreadUsage(val []byte) {
	u := t.stream.UnreadUsage(val)
	t.text.add(u.Text)
	if u.Text != "" {
		t.textEvents++
	}
}
