package weigher

import (
	"slices"

	"github.com/tidwall/gjson"
)

// A Responses stream repeats its output text at four levels
// (https://platform.openai.com/docs/api-reference/responses-streaming):
// the *.delta events stream it, a *.done event repeats each field whole
// (output_text.done's text…), response.content_part.done (and
// response.reasoning_summary_part.done) each content part, and
// response.output_item.done each output item; the terminal event's
// response.output repeats the items. An upstream may send the text at any
// of these levels alone: one that sends it only in output_item.done or
// content_part.done events, and ends without a usage and without
// response.output, streamed output nothing counted. The stream cannot
// count that text when it arrives, because an honest stream's items hold
// text no delta carries (a function call's name, a shell call's
// commands): counted beside a final usage, it could push the text past
// OutputCheckBytes and over-charge a stream whose usage is the bill. So
// it remembers what the items and parts hold beyond the text already
// counted (itemMemo) and uses it only where no usage settles the stream:
// at a terminal event without a usage (when response.output does not
// show more) and at an in-band "error" event (responsesEvent).
//
// Each level is matched against the text counted (deltaText: deltas and
// the *.done text that outran them) greedily, item by item: an item (or
// part) whose streamed fields' bytes fit in what the counted text has not
// yet matched at that level is taken as a repeat of it; one that does not
// fit is remembered whole. The bytes matched never exceed the bytes
// counted, so the counted text and what is remembered hold at least as
// many bytes as the level's text: never less than what the items showed.
// An item's fields no delta carries (responsesOutputFields) are always
// remembered.

// itemMemoMax is the most bytes of text a Responses stream remembers of
// its items and parts (itemMemo): 64 KiB, about 16,000 tokens of English,
// the size of text a stream expected to report its usage holds uncounted
// (proxy's tapTextMax). Text past it is not kept: a stream whose remembered
// text would exceed it is, when that text is used, Uncounted (it keeps
// its output reservation), with the first itemMemoMax bytes counted.
const itemMemoMax = 64 << 10

// An upstream may also send the text in response.output_item.added and
// response.content_part.added (or reasoning_summary_part.added) events,
// which an honest stream sends empty: those are two more levels, read the
// same way. Levels are matched in the order a stream sends them
// (memoLevel): each level's text is matched against the text counted and
// what the levels before it remembered, so an item whose added event held
// its text and whose done event repeats it is remembered once. The fields
// no delta carries that an added item held are remembered, and its done
// event's, when their bytes fit in those, taken as their repeat.

// memoLevel is one level of a Responses stream's items and parts that
// itemMemo reads, in the order a stream sends them: an item's added
// event, its parts' added events, their done events, its done event.
type memoLevel int

const (
	addedItems memoLevel = iota // response.output_item.added
	addedParts                  // response.content_part.added, reasoning_summary_part.added
	doneParts                   // response.content_part.done, reasoning_summary_part.done
	doneItems                   // response.output_item.done
	memoLevels                  // the number of levels
)

// itemMemo is what a Responses stream remembers of the text its
// output_item and content_part events hold beyond the text it counted
// (see above). The zero value remembers nothing. Its text is at most
// itemMemoMax bytes; a copy shares text's array, so copies must be
// clipped before either appends (Stream.reading).
type itemMemo struct {
	text []byte // the text remembered, joined, at most itemMemoMax bytes
	n    int    // bytes remembered, those past itemMemoMax included
	// hidden: an item held output that is not text (a reasoning item's
	// encrypted_content).
	hidden bool
	// matched: bytes of each level's streamed text taken as repeats of
	// the counted text and of what the levels before it remembered; held:
	// bytes of each level's streamed text remembered, which the later
	// levels repeat.
	matched, held [memoLevels]int
	// fieldsHeld: bytes of the fields no delta carries that added items
	// held (remembered); fieldsMatched: bytes of done items' such fields
	// taken as their repeats.
	fieldsHeld, fieldsMatched int
}

// room is how many bytes of level l's streamed text, given counted, the
// bytes of text the stream counted so far, can still be taken as
// repeats: the counted text and what the levels before l remembered,
// less what l matched.
func (m *itemMemo) room(l memoLevel, counted int) int {
	n := counted - m.matched[l]
	for _, h := range m.held[:l] {
		n += h
	}
	return n
}

// counted empties m once n bytes were counted in its stead (its text,
// or a terminal output's that holds at least as many: unsettledText): the
// bytes counted join the text each level is matched against, so each
// level's match is moved on by them, less what the levels before it
// remembered, which they count. Each level's text not yet matched (room)
// is then what it was: text the memory held is not matched again by a
// later part or item.
func (m *itemMemo) counted(n int) {
	for l := range m.matched {
		m.matched[l] += n
		for _, h := range m.held[:l] {
			m.matched[l] -= h
		}
	}
	m.held = [memoLevels]int{}
	m.fieldsHeld, m.fieldsMatched = 0, 0
	m.text, m.n, m.hidden = nil, 0, false
}

// keep remembers t.
func (m *itemMemo) keep(t string) {
	m.n += len(t)
	if room := itemMemoMax - len(m.text); room > 0 {
		m.text = append(m.text, t[:min(len(t), room)]...)
	}
}

// over reports whether text past itemMemoMax was left out.
func (m *itemMemo) over() bool { return m.n > len(m.text) }

// part reads a content part event's part at level l (addedParts or
// doneParts), given counted, the bytes of text the stream counted so far:
// its "text" and "refusal" strings are remembered unless their bytes fit
// in what the level can still match (room).
func (m *itemMemo) part(l memoLevel, p gjson.Result, counted int) {
	if !p.IsObject() {
		return
	}
	text, refusal := p.Get("text"), p.Get("refusal")
	n := stringBytes(text) + stringBytes(refusal)
	if n == 0 {
		return
	}
	if n <= m.room(l, counted) {
		m.matched[l] += n
		return
	}
	m.held[l] += n
	m.keepString(text)
	m.keepString(refusal)
}

// item reads an output item event's item at level l (addedItems or
// doneItems), given counted (see part): its streamed fields are
// remembered unless their bytes fit in what the level can still match
// (room). Its other fields are remembered, an added item's always, a done
// item's unless their bytes fit in what added items held of such fields
// and done items did not yet match.
func (m *itemMemo) item(l memoLevel, it gjson.Result, counted int) {
	streamed, fields := 0, 0
	m.hidden = responsesOutputFields(it, func(r gjson.Result, s bool) {
		if s {
			streamed += stringBytes(r)
		} else {
			fields += stringBytes(r)
		}
	}) || m.hidden
	keepFields := fields > 0
	if l == addedItems {
		m.fieldsHeld += fields
	} else if keepFields && fields <= m.fieldsHeld-m.fieldsMatched {
		m.fieldsMatched += fields
		keepFields = false
	}
	keepStreamed := streamed > 0
	if keepStreamed && streamed <= m.room(l, counted) {
		m.matched[l] += streamed
		keepStreamed = false
	} else if keepStreamed {
		m.held[l] += streamed
	}
	if !keepFields && !keepStreamed {
		return
	}
	responsesOutputFields(it, func(r gjson.Result, s bool) {
		if s && keepStreamed || !s && keepFields {
			m.keepString(r)
		}
	})
}

// keepString remembers r when it is a non-empty string.
func (m *itemMemo) keepString(r gjson.Result) {
	if r.Type == gjson.String && r.Str != "" {
		m.keep(r.Str)
	}
}

// clip is m with its text clipped to its length, so that an append to
// either copy does not write into the other's.
func (m itemMemo) clip() itemMemo {
	m.text = slices.Clip(m.text)
	return m
}

// stringBytes is the length of r's text when r is a string, else 0.
func stringBytes(r gjson.Result) int {
	if r.Type != gjson.String {
		return 0
	}
	return len(r.Str)
}

// outputText reads the output of a Responses terminal event without a
// usage (out, its response.output array) against counted, the bytes of
// text the stream counted so far, item by item as itemMemo.item matches
// items: an item's streamed fields are joined into text unless their
// bytes fit in what counted has not yet matched, its other fields always.
// n is text's length in bytes; hidden is set by an item holding output
// that is not text (responsesItemText).
func outputText(out gjson.Result, counted int) (text string, n int, hidden bool) {
	var j textJoiner
	pool := counted
	add := func(r gjson.Result) {
		if r.Type == gjson.String && r.Str != "" {
			n += len(r.Str)
			j.add(r)
		}
	}
	out.ForEach(func(_, it gjson.Result) bool {
		streamed := 0
		hidden = responsesOutputFields(it, func(r gjson.Result, s bool) {
			if s {
				streamed += stringBytes(r)
			} else {
				add(r)
			}
		}) || hidden
		if streamed <= pool {
			pool -= streamed
			return true
		}
		responsesOutputFields(it, func(r gjson.Result, s bool) {
			if s {
				add(r)
			}
		})
		return true
	})
	return j.String(), n, hidden
}
