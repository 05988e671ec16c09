package sse

import (
	"bytes"
	"math"
)

// DefaultMaxEventBytes is the event size limit used when
// [Scanner.MaxEventBytes] is zero or negative: 16 MiB.
const DefaultMaxEventBytes = 16 << 20

// MinMaxEventBytes is the smallest event size limit a [Scanner] applies;
// a smaller positive [Scanner.MaxEventBytes] is raised to it.
const MinMaxEventBytes = 64

// bom is the UTF-8 byte order mark the WHATWG decoder strips from the
// start of a stream.
const bom = "\xEF\xBB\xBF"

// Scanner splits a byte stream into server-sent events per the WHATWG
// "event stream interpretation" rules, delivering each event's exact raw
// bytes together with its parsed fields.
//
// The zero value is ready to use with the default limit. A Scanner is not
// safe for concurrent use; use one per stream, or Reset it between streams.
//
// Invariant: the raw slices passed to Feed's callback, concatenated in
// order, followed by Buffered, equal the bytes given to Feed, for any split
// of the input into Feed calls. The parsed events do not depend on the split
// either. Raw boundaries do not depend on it with one exception: when a
// dispatching blank line ends in CR at the very end of one Feed and the next
// Feed starts with LF, the event is delivered at once (a streaming proxy must
// not hold a complete event waiting for the next read) and that LF becomes
// the first byte of the next event's raw rather than the last byte of this
// one. Either way the concatenation is unchanged and both events stay valid
// on the wire.
type Scanner struct {
	// MaxEventBytes bounds the raw size of one event: the bytes from its
	// first byte up to and including the first byte of its dispatching line
	// terminator (an LF completing that final CRLF is not counted). Zero or
	// negative means DefaultMaxEventBytes; values below MinMaxEventBytes are
	// raised to it. A larger event is delivered in pieces flagged
	// Event.Truncated as its bytes arrive, so the scanner never holds more
	// than MaxEventBytes+2 bytes of raw input (its parsed-field buffers are
	// bounded by MaxEventBytes too); no byte is lost or reordered. Buffers
	// keep their capacity across events and Reset.
	MaxEventBytes int

	buf       []byte // raw bytes of the pending event, not yet delivered
	lineOff   int    // offset in buf of the partial line, when lineInBuf
	lineInBuf bool   // the current line started in an earlier Feed
	evLen     int    // counted size of the pending event so far
	skipLF    bool   // the last byte consumed was a CR ending a line
	countLF   bool   // that CR did not dispatch: an LF after it counts
	started   bool   // the first line has been seen (BOM handled)
	overflow  bool   // passing an oversized event through in pieces
	lineEmpty bool   // in overflow: the current line has no bytes yet

	data     []byte // data buffer, each value followed by LF (two data lines or more)
	one      []byte // the event's one data value, in place (oneHeld)
	oneHeld  bool   // the event has had one data line, held in one, not in data
	typ      []byte // event type buffer
	id       []byte // last event ID buffer; persists across events
	idSet    bool
	retry    int64
	hasRetry bool
	stray    bool // a line of the pending event no reader applies
}

// Feed consumes p, which may end anywhere (mid-line, between CR and LF,
// mid-UTF-8 sequence), and calls fn once for each event completed by p, in
// order. raw is the exact input of that event, from the first byte after
// the previous event up to and including the blank line that dispatched it,
// so comments and ignored lines before the blank line are part of it. Events
// without data lines, including a lone blank line, are delivered too
// (Event.HasData false) so that every byte is accounted for. An event larger
// than MaxEventBytes is delivered as several calls with Event.Truncated set.
//
// raw and the slices in ev are valid only during fn: they alias p or the
// scanner's buffers. An event with one data line, the usual case, has that
// line's value as its Data in place, not a copy: when the line lies in p,
// Data is p's bytes, which the caller's next read overwrites when it reads
// into the same buffer. A caller that needs Data (or raw, or any field)
// after fn returns must copy it. fn must not call
// methods of s. A nil fn discards the events. Feed keeps no reference to p
// after it returns. Work is linear in len(p): buffered bytes are never
// rescanned.
func (s *Scanner) Feed(p []byte, fn func(raw []byte, ev Event)) {
	if len(p) == 0 {
		return
	}
	if fn == nil {
		fn = func([]byte, Event) {}
	}
	limit := s.limit()
	// i is the scan position in p, evStart the first byte of p not yet
	// delivered or copied into buf, lineStart the start of the current line
	// in p (meaningless while lineInBuf).
	i, evStart, lineStart := 0, 0, 0
	if s.skipLF {
		s.skipLF = false
		if p[0] == '\n' {
			i, lineStart = 1, 1
			if s.countLF {
				s.evLen++
				if s.evLen > limit {
					evStart = s.enterOverflow(p, 0, 0, false, fn)
				}
			}
		}
		s.countLF = false
	}
	cr, lf := -1, -1
	for i < len(p) {
		if s.overflow {
			i, evStart = s.passOverflow(p, i, evStart, &cr, &lf, fn)
			lineStart = i
			continue
		}
		t := nextEOL(p, i, &cr, &lf)
		n := t - i // bytes up to and including the terminator's first byte
		if t < len(p) {
			n++
		}
		if room := limit - s.evLen; n > room {
			q := i + room
			evStart = s.enterOverflow(p, q, evStart, s.lineInBuf || q > lineStart, fn)
			i = q
			continue
		}
		s.evLen += n
		if t == len(p) {
			break
		}
		next, crlf := t+1, false
		if p[t] == '\r' {
			if next == len(p) {
				s.skipLF = true
			} else if p[next] == '\n' {
				next, crlf = next+1, true
			}
		}
		var line []byte
		if s.lineInBuf {
			s.buf = append(s.buf, p[evStart:next]...)
			evStart = next
			line = s.buf[s.lineOff : len(s.buf)-(next-t)]
			s.lineInBuf = false
		} else {
			line = p[lineStart:t]
		}
		i, lineStart = next, next
		if s.processLine(line) {
			raw := p[evStart:next]
			if len(s.buf) > 0 {
				s.buf = append(s.buf, raw...)
				raw = s.buf
			}
			fn(raw, s.event())
			s.endEvent()
			evStart = next
			continue
		}
		s.countLF = s.skipLF
		if crlf {
			s.evLen++
			if s.evLen > limit {
				evStart = s.enterOverflow(p, t+1, evStart, false, fn)
			}
		}
	}
	if s.overflow {
		if evStart < len(p) {
			fn(p[evStart:], Event{Truncated: true, Partial: true})
		}
		return
	}
	s.holdOne() // the event goes on in the next Feed: p is not the caller's after this one
	if evStart < len(p) {
		if !s.lineInBuf && lineStart < len(p) {
			s.lineOff = len(s.buf) + lineStart - evStart
			s.lineInBuf = true
		}
		s.buf = append(s.buf, p[evStart:]...)
	}
}

// Buffered returns the bytes consumed by Feed that are not yet part of a
// delivered event: the start of an event whose blank line has not arrived.
// At end of stream the proxy forwards them unchanged (a browser would
// discard such an incomplete event). The slice is valid until the next Feed
// or Reset.
func (s *Scanner) Buffered() []byte {
	return s.buf
}

// HeldBytes returns the capacity, in bytes, of the buffers s keeps from one
// Feed to the next: the pending event's raw bytes and its parsed data,
// type and last event ID. They keep their capacity across events and
// Reset, so after a large event this is what s holds, not what it uses
// now. For a caller that accounts for the memory a stream holds (the
// proxy's max_inflight_response_bytes).
func (s *Scanner) HeldBytes() int {
	return cap(s.buf) + cap(s.data) + cap(s.typ) + cap(s.id)
}

// Reset discards all state, including the last event ID and any buffered
// bytes, so s can scan a new stream. It keeps MaxEventBytes and the
// allocated buffers.
func (s *Scanner) Reset() {
	*s = Scanner{
		MaxEventBytes: s.MaxEventBytes,
		buf:           s.buf[:0],
		data:          s.data[:0],
		typ:           s.typ[:0],
		id:            s.id[:0],
	}
}

// limit returns the effective event size limit.
func (s *Scanner) limit() int {
	switch {
	case s.MaxEventBytes <= 0:
		return DefaultMaxEventBytes
	case s.MaxEventBytes < MinMaxEventBytes:
		return MinMaxEventBytes
	}
	return s.MaxEventBytes
}

// enterOverflow switches to pass-through for an event that exceeds the
// limit at p[q]: it delivers the buffered raw plus p[evStart:q] as the first
// piece, with the fields parsed so far, and returns the new evStart. lineHas
// reports whether the line in progress at q already has bytes.
func (s *Scanner) enterOverflow(p []byte, q, evStart int, lineHas bool, fn func([]byte, Event)) int {
	q = max(q, evStart) // a line completed from buf was copied past q
	raw := p[evStart:q]
	if len(s.buf) > 0 {
		s.buf = append(s.buf, raw...)
		raw = s.buf
	}
	if len(raw) > 0 {
		ev := s.event()
		ev.Truncated, ev.Partial = true, true
		fn(raw, ev)
	}
	s.endEvent()
	s.lineInBuf = false
	s.started = true
	s.overflow = true
	s.lineEmpty = !lineHas
	return q
}

// passOverflow delivers p from i on as pieces of an oversized event until
// its dispatching blank line. It returns the new scan position and evStart;
// both equal the end of the event if it ended in p.
func (s *Scanner) passOverflow(p []byte, i, evStart int, cr, lf *int, fn func([]byte, Event)) (int, int) {
	for i < len(p) {
		t := nextEOL(p, i, cr, lf)
		if t > i {
			s.lineEmpty = false
		}
		if t == len(p) {
			return t, evStart
		}
		next := t + 1
		if p[t] == '\r' {
			if next == len(p) {
				s.skipLF = true
			} else if p[next] == '\n' {
				next++
			}
		}
		if s.lineEmpty {
			fn(p[evStart:next], Event{Truncated: true})
			s.overflow = false
			s.lineEmpty = false
			return next, next
		}
		s.lineEmpty = true
		i = next
	}
	return i, evStart
}

// nextEOL returns the index of the first CR or LF in p at or after i, or
// len(p). cr and lf cache the next known position of each byte (len(p) when
// there is none) so that a Feed scans every byte of p at most twice.
func nextEOL(p []byte, i int, cr, lf *int) int {
	if *cr < i {
		*cr = len(p)
		if k := bytes.IndexByte(p[i:], '\r'); k >= 0 {
			*cr = i + k
		}
	}
	if *lf < i {
		*lf = len(p)
		if k := bytes.IndexByte(p[i:], '\n'); k >= 0 {
			*lf = i + k
		}
	}
	return min(*cr, *lf)
}

// processLine applies one complete line, without its terminator, to the
// event being built. It reports whether the line is blank, which dispatches
// the event.
func (s *Scanner) processLine(line []byte) bool {
	if !s.started {
		s.started = true
		line = bytes.TrimPrefix(line, []byte(bom))
	}
	if len(line) == 0 {
		return true
	}
	if line[0] == ':' {
		return false // comment
	}
	name, value := line, line[len(line):]
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		s.typ = append(s.typ[:0], value...)
	case "data":
		if len(s.data) == 0 && !s.oneHeld {
			// The first data line stays where it is: most events have
			// one, and it is then the event's Data as it stands.
			s.one, s.oneHeld = value, true
			break
		}
		s.holdOne()
		s.data = append(s.data, value...)
		s.data = append(s.data, '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.id = append(s.id[:0], value...)
			s.idSet = true
		}
	case "retry":
		if v, ok := parseRetry(value); ok {
			s.retry, s.hasRetry = v, true
		}
	default:
		s.stray = true
	}
	return false
}

// parseRetry parses a retry value: one or more ASCII digits, in
// milliseconds, saturating at math.MaxInt64.
func parseRetry(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			v = math.MaxInt64
			continue
		}
		v = v*10 + d
	}
	return v, true
}

// holdOne copies the data value held in place, if any, into s.data: before
// a second data line is joined to it, and before Feed returns with the
// event pending (the value may lie in the caller's p).
func (s *Scanner) holdOne() {
	if s.oneHeld {
		s.data = append(s.data, s.one...)
		s.data = append(s.data, '\n')
		s.one, s.oneHeld = nil, false
	}
}

// event returns the event built so far. Its slices alias s's buffers, or
// the input being fed for a single data line.
func (s *Scanner) event() Event {
	ev := Event{
		Type:     s.typ,
		ID:       s.id,
		IDSet:    s.idSet,
		Retry:    s.retry,
		HasRetry: s.hasRetry,
		Stray:    s.stray,
	}
	if s.oneHeld {
		ev.Data, ev.HasData = s.one, true
	} else if n := len(s.data); n > 0 {
		ev.Data, ev.HasData = s.data[:n-1], true
	}
	return ev
}

// endEvent clears the per-event state after an event (or the first piece
// of an oversized one) is delivered. The last event ID persists.
func (s *Scanner) endEvent() {
	s.buf = s.buf[:0]
	s.evLen = 0
	s.data = s.data[:0]
	s.one, s.oneHeld = nil, false
	s.typ = s.typ[:0]
	s.idSet = false
	s.retry, s.hasRetry = 0, false
	s.stray = false
}
