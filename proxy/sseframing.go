package proxy

import (
	"bytes"

	"github.com/llmguard/llmguard/weigher"
)

// An answer topUsage reads may be an SSE stream rather than JSON: a stream
// relayed unread (its events over the answer budget: usageTap's
// truncated), or one its upstream did not label text/event-stream
// (passingCount). A client reads such a stream as the SSE standard says
// (https://html.spec.whatwg.org/multipage/server-sent-events.html,
// "Interpreting an event stream"): an event's JSON is the value of its
// "data" lines joined with line feeds, so an upstream may spread one
// document over several lines (JSON allows a line break wherever it allows
// a space), between which the lines "data: " begins are no JSON. Read as
// JSON, those bytes broke the reading: a service_tier on a second line was
// "data: \"priority\"" (a tier priced as unread, or, past a key, lost) and
// the "response" of a Responses terminal event split from its "type" was
// missed, so the answer was charged at the tier asked, below its bill.
// sseFraming strips the framing and hands topUsage the JSON each event's
// data holds, as its client joins it; it also reads each event's "event"
// field, which a Responses client takes for the event's type when its
// data names none (weigher's eventTypeOf does the same for a stream read).

// Framings of an answer topUsage reads: not yet known (the bytes before
// its first that is not whitespace or a byte order mark), JSON (a first
// byte "{" or "["), or SSE (anything else: a field, a comment).
const (
	framingUnknown = iota
	framingJSON
	framingSSE
)

// The parts of an SSE line sseFraming is in.
const (
	lineStart = iota // its field name, matched against "data" and "event"
	lineColon        // just past "data:" or "event:": one space is skipped
	lineData         // a data line's value: JSON
	lineEvent        // an event line's value
	lineOther        // any other line: read as JSON when it began at rest (fed)
)

// eventFieldMax is the most bytes of an "event" field's value kept: the
// longest of terminalEvents, and spaces around it.
const eventFieldMax = 32

// sseFraming is the state of an SSE stream's framing as topUsage reads it
// (see scanFramed): bounded, a field name's few bytes and an event
// field's value. The zero value is ready.
type sseFraming struct {
	mode, line int
	// name is the field name a line's first bytes match ('d': data, 'e':
	// event), field how many of its bytes matched.
	name  byte
	field int
	// cr: the last byte was a carriage return, so a line feed next ends
	// no line.
	cr bool
	// lead: before the framing is known, the line has had bytes (spaces,
	// tabs) before its first; bom is how many bytes of a leading byte order
	// mark (which an SSE client skips) were read, seen how many bytes.
	lead      bool
	bom, seen int
	// fed: the lineOther line is read as JSON: it began at rest (depth
	// 0, outside a string), as the bytes around a stream's events were
	// read before.
	fed bool
	// ev and evN hold the event field's value being read (evOver: it was
	// longer); evTerminal: the event's event field named a terminal event.
	ev         [eventFieldMax]byte
	evN        int
	evOver     bool
	evTerminal bool
	// respTiers is the join of the response.service_tier values of the
	// event's JSON values whose "type" named no terminal event, respUsage
	// the first and last response.usage of them: an event field that
	// names one, after them, makes them the answer's.
	respTiers string
	respUsage keptUsages
}

// utf8BOM is the byte order mark an SSE client skips at a stream's start.
const utf8BOM = "\xef\xbb\xbf"

// sseNewline is what a data line's end adds to its event's JSON.
var sseNewline = []byte{'\n'}

// scanFramed is scan for an answer whose framing is not JSON (yet): it
// decides the framing, then reads an SSE stream's lines: a data line's
// value as the JSON it holds, a line feed after it (as a client joins
// them); a blank line ends the event, and a JSON value it left open is
// cut (topUsage.cut); an event line's value is kept; any other line
// (a comment, an id, a line of no field) is read as JSON when it began at
// rest, as the bytes around events were before, and cut at its end.
func (s *topUsage) scanFramed(b []byte, found func(val []byte)) {
	f := &s.framing
	for len(b) > 0 {
		c := b[0]
		if f.cr {
			f.cr = false
			if c == '\n' {
				b = b[1:]
				continue
			}
		}
		if f.mode == framingUnknown {
			switch {
			case c == '{' || c == '[':
				f.mode = framingJSON
				s.scanJSON(b, found)
				return
			case f.bom == f.seen && f.bom < len(utf8BOM) && c == utf8BOM[f.bom]:
				f.bom++
			case c == ' ' || c == '\t':
				f.lead = true
			case c == '\r' || c == '\n':
				f.lead = false
			default:
				f.mode = framingSSE
				if f.lead {
					f.line, f.fed = lineOther, true
				}
				continue // c is the line's
			}
			f.seen++
			b = b[1:]
			continue
		}
		switch f.line {
		case lineStart:
			b = s.fieldName(b, found)
		case lineColon:
			f.line = lineData
			if f.name == 'e' {
				f.line, f.evN, f.evOver = lineEvent, 0, false
			}
			if c == ' ' {
				b = b[1:]
			}
		default:
			i := lineEnd(b)
			switch {
			case f.line == lineData || f.line == lineOther && f.fed:
				s.scanJSON(b[:i], found)
			case f.line == lineEvent:
				for _, c := range b[:i] {
					if f.evN == len(f.ev) {
						f.evOver = true
						break
					}
					f.ev[f.evN] = c
					f.evN++
				}
			}
			if i == len(b) {
				return
			}
			s.endLine(found)
			f.cr = b[i] == '\r'
			b = b[i+1:]
		}
	}
}

// fieldName reads the next byte of b, at a line's field name, and returns
// the rest: a byte of "data" or "event" in its place, the colon after
// one, or a line's end; any other makes the line lineOther (the byte is
// then the line's, left in b).
func (s *topUsage) fieldName(b []byte, found func(val []byte)) []byte {
	f := &s.framing
	c := b[0]
	name := "data"
	if f.name == 'e' {
		name = "event"
	}
	switch {
	case c == '\r' || c == '\n':
		switch {
		case f.field == 0:
			s.dispatch()
		case f.field == len(name) && f.name == 'd':
			s.scanJSON(sseNewline, found) // "data" alone: an empty data line
		}
		f.field, f.name, f.cr = 0, 0, c == '\r'
	case f.field == 0 && (c == 'd' || c == 'e'):
		f.name, f.field = c, 1
	case f.field > 0 && f.field < len(name) && c == name[f.field]:
		f.field++
	case f.field > 0 && f.field == len(name) && c == ':':
		f.line = lineColon
	default:
		f.line, f.fed = lineOther, s.depth == 0 && !s.inStr
		return b
	}
	return b[1:]
}

// endLine ends the line being read (not at its field name): a data line
// adds its line feed; an event line's value is taken; a line of another
// field read as JSON cuts the value it left open.
func (s *topUsage) endLine(found func(val []byte)) {
	f := &s.framing
	switch f.line {
	case lineData:
		s.scanJSON(sseNewline, found)
	case lineEvent:
		if !f.evOver && isTerminalEvent(bytes.TrimSpace(f.ev[:f.evN])) {
			f.evTerminal = true
			if f.respTiers != "" {
				s.tier = weigher.JoinServedTiers(s.tier, f.respTiers)
				f.respTiers = ""
			}
			f.respUsage.hand(found)
		}
	case lineOther:
		if f.fed && (s.depth > 0 || s.inStr) {
			s.cut()
		}
	}
	f.line, f.field, f.name, f.fed = lineStart, 0, 0, false
}

// dispatch ends an event (its blank line): a JSON value its data left
// open is cut, and the event's type is forgotten.
func (s *topUsage) dispatch() {
	if s.depth > 0 || s.inStr {
		s.cut()
	}
	s.framing.evTerminal, s.framing.respTiers, s.framing.respUsage.n = false, "", 0
}

// lineEnd is the index of b's first carriage return or line feed, len(b)
// when it has none.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		i = j
	}
	return i
}
