package weigher

import (
	"hash/maphash"
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
// at a terminal event without a usage (with what response.output holds
// beyond it) and at an in-band "error" event (responsesEvent).
//
// Each level's texts are matched against the texts the stream counted
// (each run of deltas, each *.done text) and those the other levels
// remembered, by content: a text of an item is taken as a repeat when a
// text of the same item (output_index; an event without one matches
// any) with the same bytes (length and a keyed hash, textSeed) was
// counted or remembered and not yet matched by this level; otherwise it
// is remembered, and its key kept. Each level is so read as one
// consistent reading of the item's text: levels holding the same text
// count it once (an honest stream, its text at every level), and texts
// that differ are all counted — an upstream that splits its text across
// levels (some in deltas, some only in output_item.done, some only in
// content_part.done or .added, some only in response.output) is counted
// the union, where matching bytes alone had counted about the largest
// level (TestResponsesSplitTextCountedWhole). A text matches at most one
// key per level, so two items with the same text are two texts. An item's
// fields no delta carries (responsesOutputFields: a function call's
// name) are matched alike.

// itemMemoMax is the most bytes of text a Responses stream remembers of
// its items and parts (itemMemo): 64 KiB, about 16,000 tokens of English,
// the size of text a stream expected to report its usage holds uncounted
// (proxy's tapTextMax). Text past it is not kept: a stream whose remembered
// text would exceed it is, when that text is used, Uncounted (it keeps
// its output reservation), with the first itemMemoMax bytes counted.
const itemMemoMax = 64 << 10

// memoKeysMax is the most texts a Responses stream keeps the keys of
// (textKey, 24 bytes each: 24 KiB) to match the levels by. A text found
// once they are full is remembered (counted where no usage settles the
// stream) without its key, so that a later level repeating it counts it
// again: more, never less.
const memoKeysMax = 1024

// An upstream may also send the text in response.output_item.added and
// response.content_part.added (or reasoning_summary_part.added) events,
// which an honest stream sends empty: those are two more levels, read the
// same way.

// memoLevel is one level of a Responses stream's text that itemMemo
// matches: the deltas, the *.done events' text, an item's added event,
// its parts' added events, their done events, its done event, the
// terminal event's output.
type memoLevel int

const (
	deltaRuns  memoLevel = iota // *.delta events, a run of them up to the next event that ends a text
	doneTexts                   // *.done events' text (output_text.done…)
	addedItems                  // response.output_item.added
	addedParts                  // response.content_part.added, reasoning_summary_part.added
	doneParts                   // response.content_part.done, reasoning_summary_part.done
	doneItems                   // response.output_item.done
	outputs                     // the terminal event's response.output
)

// textKey is one text a Responses stream counted or remembered: its item
// (output_index, -1 when its event named none), bytes and keyed hash,
// and the levels that matched it (a bit per memoLevel).
type textKey struct {
	hash   uint64
	n      int32
	item   int32
	levels uint8
}

// textSeed keys the hashes of a process's texts (hash/maphash), so that an
// upstream cannot write two texts of one hash.
var textSeed = maphash.MakeSeed()

// itemMemo is what a Responses stream remembers of the text its
// output_item and content_part events hold beyond the text it counted
// (see above). The zero value remembers nothing. Its text is at most
// itemMemoMax bytes, its keys memoKeysMax; a copy shares their arrays, so
// copies must be clipped before either appends (Stream.reading).
type itemMemo struct {
	text []byte // the text remembered, joined, at most itemMemoMax bytes
	n    int    // bytes remembered, those past itemMemoMax included
	// hidden: an item held output that is not text (a reasoning item,
	// encrypted_content or not: reasoningItem).
	hidden bool
	// keys are the texts counted and remembered (see above).
	keys []textKey
}

// match reports whether level l holds a text of n bytes hashed h of item
// as a repeat: a key of the same item (either -1: any) and text that l
// has not matched yet, which it then has.
func (m *itemMemo) match(l memoLevel, item, n int, h uint64) bool {
	for i := range m.keys {
		k := &m.keys[i]
		if k.hash == h && int(k.n) == n && k.levels&(1<<l) == 0 && (int(k.item) == item || k.item < 0 || item < 0) {
			k.levels |= 1 << l
			return true
		}
	}
	return false
}

// note keeps the key of a text of n bytes hashed h, of item, that level l
// counted or remembered, while there is room.
func (m *itemMemo) note(l memoLevel, item, n int, h uint64) {
	if len(m.keys) < memoKeysMax {
		m.keys = append(m.keys, textKey{hash: h, n: int32(min(n, 1<<31-1)), item: int32(max(min(item, 1<<31-1), -1)), levels: 1 << l})
	}
}

// seen reads t, a text of item level l holds (not remembered by the
// memo: counted, or counted by the caller), and reports whether it
// repeats a text counted or remembered; if not, its key is kept.
func (m *itemMemo) seen(l memoLevel, item int, t string) bool {
	h := maphash.String(textSeed, t)
	if m.match(l, item, len(t), h) {
		return true
	}
	m.note(l, item, len(t), h)
	return false
}

// counted empties m once its text was counted (unsettledText): what it
// remembered, and the keys: a level after it is read afresh.
func (m *itemMemo) counted() {
	m.keys = m.keys[:0]
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

// level reads r, a text level l holds of the item of the event idx:
// remembered unless it is a repeat (seen).
func (m *itemMemo) level(l memoLevel, idx *eventIndex, r gjson.Result) {
	if r.Type != gjson.String || r.Str == "" || m.seen(l, idx.get(), r.Str) {
		return
	}
	m.keep(r.Str)
}

// part reads a content part event's part (of the event idx) at level l
// (addedParts or doneParts): its "text" and "refusal" strings.
func (m *itemMemo) part(l memoLevel, idx *eventIndex, p gjson.Result) {
	if !p.IsObject() {
		return
	}
	m.level(l, idx, p.Get("text"))
	m.level(l, idx, p.Get("refusal"))
}

// item reads an output item event's item (of the event idx) at level l
// (addedItems or doneItems): each of its fields that hold text
// (responsesOutputFields).
func (m *itemMemo) item(l memoLevel, idx *eventIndex, it gjson.Result) {
	m.hidden = responsesOutputFields(it, func(r gjson.Result, _ bool) {
		m.level(l, idx, r)
	}) || m.hidden || reasoningItem(it)
}

// reasoningItem reports whether it, a Responses output item, is a
// reasoning item: the reasoning it stands for was billed as output
// ("reasoning tokens are not visible via the API",
// https://platform.openai.com/docs/guides/reasoning), and the item shows
// at most a summary of it (by default an empty one, no
// encrypted_content), so without a usage its text is not what it cost.
func reasoningItem(it gjson.Result) bool {
	return it.IsObject() && lastGet(it, "type").Str == "reasoning"
}

// clip is m with its text and keys clipped to their length, so that an
// append to either copy does not write into the other's; the keys are
// copied, as match marks them.
func (m itemMemo) clip() itemMemo {
	m.text = slices.Clip(m.text)
	m.keys = slices.Clone(m.keys)
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
// usage (out, its response.output array) as the outputs level, item i of
// it as output_index i: each text of an item is joined into text unless
// it repeats one counted or remembered (itemMemo.seen). n is text's length
// in bytes; hidden is set by an item holding output that is not text
// (responsesOutputFields), or by a reasoning item (reasoningItem).
func (m *itemMemo) outputText(out gjson.Result) (text string, n int, hidden bool) {
	var j textJoiner
	i := 0
	out.ForEach(func(_, it gjson.Result) bool {
		hidden = responsesOutputFields(it, func(r gjson.Result, _ bool) {
			if r.Type == gjson.String && r.Str != "" && !m.seen(outputs, i, r.Str) {
				n += len(r.Str)
				j.add(r)
			}
		}) || hidden || reasoningItem(it)
		i++
		return true
	})
	return j.String(), n, hidden
}
