package sse

// Event is one event parsed by a [Scanner]. Its slices alias the scanner's
// buffers or the caller's input and are valid only during the callback that
// receives it; copy them to keep them. The zero value is an event with no
// fields.
//
// Fields hold bytes as received: the scanner does not validate UTF-8 or
// replace invalid sequences (the WHATWG decoder would substitute U+FFFD).
// Because CR, LF, ':' and ' ' never occur inside a multi-byte UTF-8
// sequence, the line and field boundaries are the same as a browser's.
type Event struct {
	// Type is the value of the last "event" field of the block. Empty means
	// the default type, "message".
	Type []byte

	// Data is the values of the block's "data" fields joined by LF, without
	// the final LF. It is meaningful only when HasData is true. When the
	// block has a single "data" field, Data is its value where it lies, in
	// the input given to Feed or the scanner's buffer, without a copy: a
	// caller that keeps it past the callback, whose next read reuses that
	// input's buffer, must copy it first.
	Data []byte

	// HasData reports whether the block had at least one "data" field
	// (possibly with an empty value). A browser dispatches nothing for a
	// block without data; the scanner still delivers it so that its raw
	// bytes (comments, "id:"/"retry:" lines, stray blank lines) are
	// accounted for. Callers that only want messages skip events with
	// HasData false but still forward their raw bytes.
	HasData bool

	// ID is the stream's last event ID at dispatch, as in the WHATWG
	// lastEventId: the value of the most recent valid "id" field in this or
	// any earlier event of the stream (an "id" value containing NUL is
	// ignored). Empty when none has been seen since the last Reset.
	ID []byte

	// IDSet reports whether this block itself contained a valid "id" field.
	IDSet bool

	// Retry is the reconnection time in milliseconds from the last valid
	// "retry" field of this block (ASCII digits only; values beyond int64
	// saturate). Meaningful only when HasRetry is true.
	Retry int64

	// HasRetry reports whether this block contained a valid "retry" field.
	HasRetry bool

	// Stray reports that the block had a line no reader applies: not
	// blank, not a comment (":…"), and not a "data", "event", "id" or
	// "retry" field (a misspelled field, an upstream's own, a line of some
	// other format such as a JSON document). Its bytes reach a client
	// whose reader drops them, so a proxy that weighs what it relays must
	// not take them for nothing. Lines after a truncated event's limit are
	// not parsed and do not set it.
	Stray bool

	// Truncated reports that the event was larger than the scanner's
	// MaxEventBytes, so it is delivered as a run of pieces instead of whole.
	// The first piece carries the fields parsed from the lines completed
	// before the limit (Data is then incomplete); later pieces carry no
	// fields. Lines of the event after the limit are not parsed, so an "id"
	// or "retry" there is not applied.
	Truncated bool

	// Partial reports that more pieces of this truncated event follow. The
	// last piece, which ends with the dispatching blank line, has Truncated
	// true and Partial false. Always false when Truncated is false.
	Partial bool
}
