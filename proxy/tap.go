package proxy

import (
	"bytes"
	"unicode/utf8"

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

	// count counts streamed text in the request's model's tokens; nil
	// counts nothing (tests of the relay alone).
	count func(text string) int64

	sc   sse.Scanner
	out  []byte
	text []byte // streamed output text not counted yet
	// counted is the tokens of the text already counted and let go: the
	// text is counted in pieces of about tapTextPiece bytes, so a stream of
	// any length holds a bounded amount of it.
	counted int64
	// unread: some of the stream's data was relayed without being read (an
	// event over sse.MaxEventBytes, or one the upstream never finished), so
	// the text counted is not all the stream carried.
	unread bool
}

// tapTextPiece is the size, in bytes, at which held text is counted and
// let go.
const tapTextPiece = 64 << 10

// outputTokens is the tokens of all the text the stream carried, counted
// locally.
func (t *usageTap) outputTokens() int64 {
	if len(t.text) > 0 && t.count != nil {
		t.counted += t.count(string(t.text))
		t.text = t.text[:0]
	}
	return t.counted
}

// countPiece counts the held text up to a cut between words (a space or a
// newline: pre-tokenizers split there too, so the pieces count as the whole
// would), keeps the rest, and lets the counted part go.
func (t *usageTap) countPiece() {
	if t.count == nil {
		t.text = t.text[:0]
		return
	}
	cut := bytes.LastIndexAny(t.text, " \n")
	if cut < len(t.text)/2 { // no word break late enough: cut at a character boundary
		cut = len(t.text)
		for cut > 0 && !utf8.RuneStart(t.text[cut-1]) {
			cut--
		}
		if cut > 0 {
			cut-- // before the last (possibly incomplete) character
		}
	}
	if cut <= 0 {
		return
	}
	t.counted += t.count(string(t.text[:cut]))
	t.text = t.text[:copy(t.text, t.text[cut:])]
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
		t.text = append(t.text, u.Text...)
		if len(t.text) >= tapTextPiece {
			t.countPiece()
		}
		keep = !(t.strip && u.UsageOnly)
	}
	if t.strip && keep {
		t.out = append(t.out, raw...)
	}
}
