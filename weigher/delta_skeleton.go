package weigher

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// A Messages stream sends its output as content_block_delta events that,
// within a content block, differ only in the text they carry:
//
//	{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}
//
// A deltaSkeleton is the last such event read in full, cut around the
// contents of the string messagesEvent counted (delta.text, partial_json or
// thinking): a new event whose bytes are the skeleton's prefix, then the
// contents of a string that jsonscan.CheckString accepts, then the
// skeleton's suffix, under the same SSE event name, is read on the fast
// path. It is the skeleton with one string value swapped for a valid one,
// so it passes the same check (parseObject: syntax, depth, duplicate keys)
// and messagesEvent takes the same branch for it (its choices depend on
// other strings, which are the skeleton's, byte for byte): its update is
// the Text of the new string, decoded as the full read decodes it
// (gjson, cloneText). Every other string is compared as bytes, so the
// event type, the delta type and the index cannot change.
//
// Memory: at most maxSkeletonBytes of event and maxDeltaEventName of event
// name per stream. Time: a match compares at most the event's bytes once
// and checks the one string.

// maxDeltaEventName is the longest SSE event name a deltaSkeleton keeps
// ("content_block_delta" is 19 bytes).
const maxDeltaEventName = 64

// deltaSkeleton is the last Messages text-bearing content_block_delta read
// in full (see above). The zero value holds none. Not safe for concurrent
// use.
type deltaSkeleton struct {
	// prefix is the event (space trimmed) up to and with the counted
	// string's opening quote, suffix from its closing quote on; ok says
	// they hold a skeleton.
	prefix, suffix []byte
	// name is the SSE event name the skeleton came with.
	name []byte
	// maxDepth is the nesting limit the skeleton was checked under.
	maxDepth int
	ok       bool
}

// keep makes data, an event messagesEvent read in full (nested at most
// maxDepth levels) under the SSE event name eventType as a text-bearing
// content_block_delta whose counted string is t (a Result whose Raw lies
// in data), the skeleton; when it cannot be one (too large, t not a string
// of data), d keeps no skeleton.
func (d *deltaSkeleton) keep(eventType, data []byte, t gjson.Result, maxDepth int) {
	d.ok = false
	data = trimJSONSpace(data)
	if t.Type != gjson.String || len(t.Raw) < 2 || len(data) > maxSkeletonBytes || len(eventType) > maxDeltaEventName || len(data) == 0 {
		return
	}
	off := offsetIn(data, t.Raw)
	end := off + len(t.Raw)
	if off < 0 || data[off] != '"' || data[end-1] != '"' {
		return
	}
	d.prefix = append(d.prefix[:0], data[:off+1]...)
	d.suffix = append(d.suffix[:0], data[end-1:]...)
	d.name = append(d.name[:0], eventType...)
	d.maxDepth, d.ok = maxDepth, true
}

// match reads data under the SSE event name eventType (nested at most
// maxDepth levels) on the fast path when it has the skeleton's shape: the
// update messagesEvent would return, and true; false when it has not (or d
// holds no skeleton for that limit).
func (d *deltaSkeleton) match(eventType, data []byte, maxDepth int) (StreamUpdate, bool) {
	if !d.ok || maxDepth != d.maxDepth || !bytes.Equal(eventType, d.name) {
		return StreamUpdate{}, false
	}
	data = trimJSONSpace(data)
	if len(data) < len(d.prefix)+len(d.suffix) || len(data) > maxSkeletonBytes ||
		!bytes.HasPrefix(data, d.prefix) || !bytes.HasSuffix(data, d.suffix) {
		return StreamUpdate{}, false
	}
	start := len(d.prefix) - 1
	end, _, r := jsonscan.CheckString(data, start, jsonscan.Options{})
	if r != jsonscan.OK || end != len(data)-len(d.suffix)+1 {
		return StreamUpdate{}, false
	}
	return StreamUpdate{Text: cloneText(gjson.Parse(bodyString(data[start:end])))}, true
}

// trimJSONSpace is b without the JSON whitespace (RFC 8259 §2: space, tab,
// line feed, carriage return) around it. Not bytes.TrimSpace, which also
// trims \v, \f, U+0085 and U+00A0: parseObject checks the event untrimmed,
// and those bytes make it invalid.
func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isJSONSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
