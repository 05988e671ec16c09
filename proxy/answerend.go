package proxy

import (
	"bytes"
	"time"

	"github.com/valyala/fasthttp"
)

// A non-streamed answer whose length its upstream did not declare ends
// for llmguard when the upstream ends its body: the connection's close
// for a close-delimited one (HTTP/1.0, or HTTP/1.1 with neither
// Content-Length nor chunked coding), the last chunk for a chunked one.
// An upstream that sent a whole JSON answer and then did neither held
// the caller's answer, its settlement and its ledger record until the
// upstream timeout (10 minutes by default), as a lingering stream did
// before lingerCut. A JSON answer's end is known without the transport:
// its top-level object or array closes. So once it has closed, with
// nothing but whitespace after it, an upstream silent for
// streamEndGrace is cut, as a stream is after its terminal event
// (answerEnd): the answer is what came, settled at its usage. A byte
// other than whitespace after the value (a second value, garbage) means
// the body is not one JSON value: it then ends only as its upstream ends
// it. Only an answer labelled JSON is followed (application/json, or a
// +json type): a JSON Lines body (a file's content) is a value per line,
// with any pause between them.

// valueState is where valueEnd is in a body.
type valueState uint8

const (
	valueBefore valueState = iota // whitespace so far
	valueIn                       // inside the top-level object or array, outside strings
	valueString                   // inside a string
	valueEscape                   // after a string's backslash
	valueClosed                   // the value has closed; whitespace since
	valueNot                      // not one object or array: never ends early
)

// valueEnd follows a body, as its bytes arrive, that should be one JSON
// object or array, to know when that value has closed. It checks no more
// of JSON than its brackets and strings: whether the body parses is the
// usage reader's concern. The zero value is at a body's start. Not safe
// for concurrent use.
type valueEnd struct {
	depth int // open objects and arrays
	state valueState
}

// feed follows b, the body's next bytes.
func (v *valueEnd) feed(b []byte) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch v.state {
		case valueIn:
			// Skip to the next byte that matters.
			j := bytes.IndexAny(b[i:], "\"{}[]")
			if j < 0 {
				return
			}
			i += j
			switch b[i] {
			case '"':
				v.state = valueString
			case '{', '[':
				v.depth++
			default: // '}', ']'
				if v.depth--; v.depth == 0 {
					v.state = valueClosed
				}
			}
		case valueString:
			// The string's next quote, unless a backslash comes first
			// (IndexByte twice: faster than IndexAny over text).
			rest := b[i:]
			q := bytes.IndexByte(rest, '"')
			if q >= 0 {
				rest = rest[:q]
			}
			if e := bytes.IndexByte(rest, '\\'); e >= 0 {
				i += e
				v.state = valueEscape
				continue
			}
			if q < 0 {
				return
			}
			i += q
			v.state = valueIn
		case valueEscape:
			v.state = valueString // the escaped byte (a \u's digits are plain bytes)
		case valueBefore, valueClosed:
			switch c {
			case ' ', '\t', '\n', '\r':
			case '{', '[':
				if v.state == valueBefore {
					v.state, v.depth = valueIn, 1
				} else {
					v.state = valueNot
					return
				}
			default:
				v.state = valueNot
				return
			}
		default: // valueNot
			return
		}
	}
}

// answerEnd cuts the read of a non-streamed JSON answer whose upstream
// stays silent for a grace after its value closed (see valueEnd). The
// zero value is off; on sets it to follow a body. Not safe for
// concurrent use: the reads of one body feed it, in turn.
type answerEnd struct {
	value  valueEnd
	linger lingerCut
	// raw is the upstream body the cut closes; nil: off.
	raw   fasthttp.ReadCloserWithError
	grace time.Duration
}

// on makes e follow raw, an upstream body of the content type ctype
// whose length is declared as size (fasthttp's: -1 chunked, -2 until
// the close), cutting its read after grace of silence past the value's
// end. A body with a declared length, or one not labelled JSON, is not
// followed: e stays off.
func (e *answerEnd) on(raw any, ctype []byte, size int, grace time.Duration) {
	rc, ok := raw.(fasthttp.ReadCloserWithError)
	if !ok || size >= 0 || !jsonType(ctype) {
		return
	}
	e.raw, e.grace = rc, grace
}

// saw follows b, the body's next bytes: arms the cut while the value has
// closed with only whitespace since (again for each such read: bytes
// within the grace start it again), and turns e off for good once the
// body is not one value. A nil or off e does nothing.
func (e *answerEnd) saw(b []byte) {
	if e == nil || e.raw == nil || len(b) == 0 {
		return
	}
	e.value.feed(b)
	switch e.value.state {
	case valueClosed:
		e.linger.arm(e.raw, e.grace)
	case valueNot:
		e.linger.stop()
		e.raw = nil
	}
}

// ended reports whether e cut its body's read: the read's error then is
// the upstream's silence after a whole answer, the body's end.
func (e *answerEnd) ended() bool { return e != nil && e.linger.fired() }

// stop disarms e, waiting for a cut being made (see lingerCut.stop);
// called once the body's reads are over, before it is closed.
func (e *answerEnd) stop() {
	e.linger.stop()
	e.raw = nil
}

// jsonType reports whether the media type of the Content-Type value ct
// is JSON's: application/json or a structured +json type (RFC 6839 §3.1),
// in any case, parameters aside.
func jsonType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	const plain, suffix = "application/json", "+json"
	if len(ct) >= len(plain) && bytes.EqualFold(ct, []byte(plain)) {
		return true
	}
	return len(ct) > len(suffix) && bytes.IndexByte(ct, '/') > 0 && bytes.EqualFold(ct[len(ct)-len(suffix):], []byte(suffix))
}
