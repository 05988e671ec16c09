package weigher

import (
	"bytes"
	"hash/maphash"
	"math"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/spec"
)

// Stream reads the SSE events of one streamed response of any kind, so one
// proxy code path serves chat, completions, Responses and Messages streams:
// feed it every event with [Stream.Event] (the SSE "event" field, empty for
// OpenAI's chat and completions chunks, and the joined "data" field), append
// each update's Text for local counting, and at the end call [Stream.Settle].
//
// Per kind (see stream_events.go for the event shapes):
//   - chat, completions: usage arrives in the include_usage chunk (final);
//   - responses: usage arrives under response.usage of response.completed,
//     response.incomplete or response.failed (final);
//   - messages: message_start reports the input (and cache) figures and a
//     placeholder output; each message_delta repeats the output count
//     cumulatively (newer API versions the input figures too): the largest,
//     that is the last, value wins, never the sum. The usage is final at
//     message_stop when a message_delta reported the output, unless an
//     event was Unread (it may have been a message_delta with a larger
//     count): the figures read are then partial.
//
// Make one with [NewStream] per response. The zero value reads nothing (as
// KindOther). Not safe for concurrent use.
type Stream struct {
	kind    Kind
	usage   Usage          // the usage reported so far, normalised
	has     uint8          // hasInput, hasOutput: the figures of usage reported
	anth    anthropicUsage // messages: the figures as reported, folded into usage
	final   bool
	errSeen bool
	done    bool
	// partialImages: the response.image_generation_call.partial_image
	// events of a Responses stream, each partialImageTokens image output
	// tokens beside its images (added to the terminal event's ImageTokens).
	// An int32 in the padding after done.
	partialImages int32
	// images: the image_generation_call items a Responses stream's
	// output_item events showed (imageSeen). The upstream bills an image
	// its stream showed whether or not a terminal event follows.
	images imageSeen
	// ended0, ended: bit i of ended0 set when choice i < 64 reported a
	// finish_reason, bit i-64 of ended when choice i (64 ≤ i <
	// MaxEndedChoices) did (chat, completions; see [Stream.Ended]); ended
	// is nil until such a choice did (n ≤ 64, all but unheard of, costs no
	// allocation). At most MaxEndedChoices/8 bytes.
	ended0 uint64
	ended  []uint64
	unread bool // an event was Unread: a Messages usage is then never final
	// disputed: an event named a key twice and its two readings disagreed
	// on whether it reports a usage (stream_dupkey.go): the reading with
	// none falls back on the estimate, so Settle charges at least its input.
	disputed bool
	// closed: the upstream has reported what should be its last output
	// figure (a chat or completions usage chunk, a Responses terminal
	// event's usage, a Messages message_delta usage or message_stop).
	closed bool
	// late: output text arrived after closed. The figures reported do not
	// cover it, so no usage is final any more (see [Stream.Event]).
	late bool
	// deltaOutput: a Messages message_delta reported an output count
	// (message_start's is a placeholder).
	deltaOutput bool
	// deltaText, doneText: bytes of Responses text seen in *.delta events
	// and in the *.done events that repeat it whole (see responsesEvent).
	deltaText, doneText int
	// items: what a Responses stream's output_item and content_part
	// events (.added and .done) held beyond the text counted, used only
	// where no usage settles the stream (responses_items.go); at most
	// itemMemoMax bytes of text.
	items itemMemo
	// run hashes the Responses deltas since the last event that ends a
	// text (runLen bytes), all of type runType, a text counted that the
	// levels are matched against (closeRun).
	run      maphash.Hash
	runLen   int
	runType  string
	maxDepth int // nesting limit of an event's data; 0: DefaultMaxDepth
	// skel reads chat and completions chunks shaped as the last one read
	// in full on a fast path (chunk_skeleton.go); nil until the first.
	skel *chunkSkeleton
	// shapes are the chunk shapes the streams of the Weigher that made
	// this one share (nil: none), handed to skel.
	shapes *chunkShapes
	// delta reads Messages content_block_delta events shaped as the last
	// one read in full on a fast path (delta_skeleton.go); nil until the
	// first.
	delta *deltaSkeleton
	// resp reads Responses *.delta events shaped as the last one read in
	// full on a fast path (response_skeleton.go); nil until the first.
	resp *responseSkeleton
	// tier is the service tier the stream says it was served at
	// (spec.Usage.ServiceTier): a chat or completions chunk's
	// service_tier, a Responses terminal event's response.service_tier;
	// "" until one names it, spec.TierUnread once two disagree.
	tier string
}

// NewStream returns a Stream reading a response of kind k, whose events
// nest at most [DefaultMaxDepth] levels (deeper events are not read).
// KindEmbeddings (which does not stream), KindCountTokens and KindOther
// streams are not parsed.
func NewStream(k Kind) Stream { return Stream{kind: k} }

// NewStream is [NewStream] with w's nesting limit ([Options.MaxDepth]) for
// the events: an event nested deeper is relayed but not read
// ([StreamUpdate.Unread]). The streams of one Weigher share the shapes of
// the chat and completions chunks they read (a few KiB per Weigher, see
// chunk_skeleton.go), so that a response's first chunk of each shape is
// read as cheaply as the next ones; what each event yields is the same.
// Safe for concurrent use (each Stream is not).
func (w *Weigher) NewStream(k Kind) Stream {
	return Stream{kind: k, maxDepth: w.maxDepth, shapes: w.chunkShapes}
}

// StreamUpdate is what one event said. The zero value is an event with
// nothing of interest (ping, content_block_stop, response.created…).
type StreamUpdate struct {
	// Text is the event's generated output, for local counting when no
	// usage arrives: chat delta content / refusal / tool-call arguments;
	// completions choice text; Responses *.delta text (output text, refusal,
	// function-call and custom-tool arguments, reasoning and reasoning
	// summary text…); Messages text_delta, input_json_delta and
	// thinking_delta (and a content block's initial text); at a Responses
	// terminal event without a usage, or an in-band error, the text its
	// output (or its output_item and content_part events) held
	// beyond what was streamed. It does not alias data.
	Text string
	// HasUsage is true when the event carried usage (now in
	// [Stream.Usage]).
	HasUsage bool
	// UsageOnly is true for the extra chat or completions chunk that
	// stream_options.include_usage adds (empty choices, usage present): the
	// proxy drops it when it asked for usage on the client's behalf.
	UsageOnly bool
	// Err is true for an in-band error: an {"error": …} chat or completions
	// chunk, a Responses "error" or "response.failed" event, a Messages
	// "error" event. Err with HasUsage (response.failed) means the error
	// came with the usage to charge.
	Err bool
	// Done is true for the stream's terminal event: "[DONE]",
	// response.completed / response.incomplete / response.failed,
	// message_stop.
	Done bool
	// Finished are the indexes of the choices a chat or completions chunk
	// ended ([Chunk.Finished]: its choices with a finish_reason that is not
	// null, each index in [0, MaxEndedChoices)); the zero value when none.
	Finished ChoiceEnds
	// Uncounted is true when the event, read, carried output that is not
	// text llmguard counts (Text does not hold it): a chat delta's audio or
	// unknown member (see [Chunk.Uncounted]), a Responses
	// response.audio.delta or image_generation_call.partial_image, a
	// Messages redacted_thinking block or a content_block_delta of a type
	// llmguard does not know that holds data. The proxy treats the stream as it
	// does one with an Unread event (at least the output reservation unless
	// a readable final usage arrives); other fields are set as usual.
	Uncounted bool
	// Unread is true when the event's data held something but could not be
	// read: not a JSON object (nor "[DONE]"), nested deeper than the
	// stream's limit, or naming a key twice in one object (RFC 8259 §4
	// leaves such an object's meaning to each parser: the caller's SDK
	// keeps the last member where a first-match reader would not) when
	// its two readings disagree on whether it reports a usage (one that
	// reads both ways alike is read, at its dearer reading:
	// stream_dupkey.go). Nothing else is set then, but for such an
	// event's readings: such an event may carry output (or a usage) that
	// llmguard did not count, so the proxy charges such a stream, unless
	// a readable final usage arrives, at least its output reservation, as
	// for an event too large to read.
	Unread bool
}

// StreamUsage is the usage a stream has reported so far, in tokens.
type StreamUsage struct {
	// Usage is the reported usage, normalised as [Usage] documents; figures
	// not reported are 0.
	Usage Usage
	// Input is true when the input figures were reported (a Messages stream
	// reports them at message_start, the others with the final usage).
	Input bool
	// Output is true when an output figure was reported (for Messages, a
	// cumulative count that is final only with Final).
	Output bool
	// Final is true when the upstream's final usage report was seen.
	Final bool
}

// Event reads one SSE event: eventType is its "event" field (may be empty),
// data its "data" field. Empty (or blank) data yields the zero
// StreamUpdate; garbage, data nested deeper than the stream's limit and
// data naming a key twice in an object (checked by a flat scan before
// anything parses it) yield an update with only Unread set, except that
// valid data naming a key twice is read both ways, first and last member
// wins, at the dearer reading (stream_dupkey.go). It never
// panics and never keeps eventType or data.
func (s *Stream) Event(eventType, data []byte) StreamUpdate {
	r := s.kind.row()
	if !r.weighed || blank(data) {
		return StreamUpdate{}
	}
	closed := s.closed
	u := r.stream(s, eventType, data)
	if u.Unread {
		// A key named twice: read both ways, at the dearer reading.
		if d, ok := s.dupKeyEvent(r.stream, eventType, data); ok {
			u = d
		}
	}
	s.errSeen = s.errSeen || u.Err
	s.done = s.done || u.Done
	for k := range u.Finished.Len() {
		s.markEnded(u.Finished.At(k))
	}
	s.unread = s.unread || u.Unread
	// Output after the usage that should have been the last figure (text
	// after an include_usage chunk, a response.completed, a message_delta
	// or a message_stop) is output that usage does not cover: from then on
	// the stream settles at the larger of the figures reported and the
	// text counted, never at the reported usage alone. A lenient upstream
	// could otherwise report 1 token and stream any amount after it.
	if u.Text != "" && closed {
		s.late = true
	}
	if s.late {
		s.final = false
	}
	return u
}

// UnreadUsage reads val, the JSON of a usage value found in an event the
// caller relayed unread (too large to read whole; proxy's bounded scan of
// its bytes finds a top-level "usage", and a Responses terminal event's
// response.usage), as the stream reads the usage of the event of its kind
// that reports one: a chat or completions usage chunk, a Responses
// response.completed (its usage final: the stream's bill), a Messages
// message_delta (a cumulative count, final at message_stop). A second
// usage joins the first at the dearer reading, as in [Stream.Event]. A
// kind whose events report no usage so (images) reads nothing. The update
// is the synthetic event's ([Stream.Event]); the caller, who relayed the
// event unread, still treats the stream as one with unread output.
func (s *Stream) UnreadUsage(val []byte) StreamUpdate {
	w := s.kind.row().unreadUsage
	if w[0] == "" {
		return StreamUpdate{}
	}
	doc := make([]byte, 0, len(w[0])+len(val)+len(w[1]))
	doc = append(append(append(doc, w[0]...), val...), w[1]...)
	return s.Event(nil, doc)
}

// Usage is the usage reported so far, with the service tier the stream
// named ([Usage.ServiceTier]: each chat or completions chunk names it, a
// Responses stream in its terminal event; "" when none did, TierUnread
// when two disagreed), whether or not it reported figures.
func (s *Stream) Usage() StreamUsage {
	u := s.usage
	u.ServiceTier = s.tier
	return StreamUsage{Usage: u, Input: s.has&hasInput != 0, Output: s.has&hasOutput != 0, Final: s.final}
}

// noteTier notes that an event named the service tier t ("" : none).
func (s *Stream) noteTier(t string) {
	if t != "" && t != s.tier {
		s.tier = joinTiers(s.tier, t)
	}
}

// Err reports whether an in-band error event was seen.
func (s *Stream) Err() bool { return s.errSeen }

// Done reports whether the stream's terminal event was seen.
func (s *Stream) Done() bool { return s.done }

// Ended reports whether the stream reached its end: its terminal event was
// seen ([Stream.Done]), or, for a chat or completions stream, a
// finish_reason for each of its choices (choices: the request's n, at
// least 1; each index in [0, choices) ended at least once, however often
// one of them repeats its end; [Chunk.Finished]), as an OpenAI-compatible
// upstream that never sends "[DONE]" ends its answer. A request for more
// than [MaxEndedChoices] choices ends only at its terminal event. A stream
// that did not end was broken off by its upstream, whatever its transport
// said.
func (s *Stream) Ended(choices int64) bool {
	if s.done {
		return true
	}
	choices = max(choices, 1)
	if choices > MaxEndedChoices {
		return false
	}
	for w := 0; w*64 < int(choices); w++ {
		word := s.ended0
		if w > 0 {
			if s.ended == nil {
				return false
			}
			word = s.ended[w-1]
		}
		mask := ^uint64(0)
		if r := int(choices) - w*64; r < 64 {
			mask = uint64(1)<<r - 1
		}
		if word&mask != mask {
			return false
		}
	}
	return true
}

// markEnded notes that choice i (< MaxEndedChoices) ended.
func (s *Stream) markEnded(i int) {
	if i < 64 {
		s.ended0 |= 1 << i
		return
	}
	if s.ended == nil {
		s.ended = make([]uint64, MaxEndedChoices/64-1)
	}
	s.ended[i/64-1] |= 1 << (i % 64)
}

// Source says where a settled usage comes from; defined once in package
// spec.
type Source = spec.Source

// Sources [Stream.Settle] returns (never [spec.SourceReserved]).
const (
	SourceReported = spec.SourceReported
	SourcePartial  = spec.SourcePartial
	SourceCounted  = spec.SourceCounted
	SourceRefund   = spec.SourceRefund
)

// Settle returns what the stream cost, given the request's estimate and the
// tokens of the streamed Text counted locally ([Weigher.CountText] over the
// concatenated updates):
//   - the final reported usage when the upstream sent it (SourceReported);
//   - otherwise each reported figure, the estimate's InputTokens for an
//     unreported input (at least it, when an event's two readings
//     disagreed on whether it reports a usage), for the output the larger of a reported
//     (cumulative) count and counted, and for web searches the larger of
//     the reported and the estimate's WebSearches (SourcePartial, or
//     SourceCounted when nothing was reported) — a stream the client
//     abandons is charged its input plus what was streamed (DESIGN.md §2);
//   - an in-band error with no usage and nothing streamed refunds
//     everything (SourceRefund).
//
// Whatever the source but a refund, the usage carries the service tier
// the stream named ([Stream.Usage]).
func (s *Stream) Settle(est Estimate, counted int64) (Usage, Source) {
	r := s.Usage()
	if r.Final {
		return r.Usage, SourceReported
	}
	counted = max(counted, 0)
	if s.errSeen && !r.Input && !r.Output && counted == 0 {
		return Usage{}, SourceRefund
	}
	u := r.Usage
	if !r.Input {
		u.InputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.CacheWrite1hTokens = est.InputTokens, 0, 0, 0
	}
	if s.disputed {
		u.InputTokens = max(u.InputTokens, est.InputTokens)
	}
	u.OutputTokens = max(u.OutputTokens, counted)
	// Searches run before the stream ended may not have been reported
	// yet: the reserved ones stand.
	u.WebSearches = max(u.WebSearches, est.WebSearches)
	// Images the stream showed were made, reserved or not (a stored
	// prompt's tools, more calls than reserved).
	u.ImageTokens = int32(min(max(int64(u.ImageTokens), s.imagesSeen()), math.MaxInt32))
	if r.Input || r.Output {
		return u, SourcePartial
	}
	return u, SourceCounted
}

// imageSeen counts the image_generation_call items of a Responses
// stream's response.output_item.added and .done events: how many of each,
// the image output tokens (imageItemTokens: each item's size and quality,
// the dearest when it names none) of the done ones, and the largest of an
// added one (an item is added before its image is made, often naming no
// size: the dearest). Each figure at most maxTokens; the zero value is
// none seen.
type imageSeen struct {
	added, done  int64 // items
	doneTokens   int64 // tokens of the done items
	addedLargest int64 // tokens of the dearest added item
}

// tokens is the image output tokens the items seen show: the done ones',
// and each added item no done one followed at the dearest added one's (a
// stream cut while it made the image: the upstream bills it).
func (m imageSeen) tokens() int64 {
	open := max(m.added-m.done, 0)
	return min(m.doneTokens+min(open, maxTokens/max(m.addedLargest, 1))*m.addedLargest, maxTokens)
}

// upper is the larger of each figure of m and o (two readings of one
// event: stream_dupkey.go).
func (m imageSeen) upper(o imageSeen) imageSeen {
	return imageSeen{added: max(m.added, o.added), done: max(m.done, o.done),
		doneTokens: max(m.doneTokens, o.doneTokens), addedLargest: max(m.addedLargest, o.addedLargest)}
}

// imagesSeen is the image output tokens a Responses stream's events
// showed: its image items' (imageSeen.tokens) plus partialImageTokens for
// each partial image.
func (s *Stream) imagesSeen() int64 {
	return s.images.tokens() + int64(s.partialImages)*partialImageTokens
}

// noteImageItem counts item when it is an image_generation_call, as one
// an output_item.done event showed when done, else as an added one.
func (s *Stream) noteImageItem(done bool, item gjson.Result) {
	n := imageItemTokens(item)
	if n == 0 {
		return
	}
	m := &s.images
	if done {
		m.done = min(m.done+1, maxTokens)
		m.doneTokens = min(m.doneTokens+n, maxTokens)
		return
	}
	m.added = min(m.added+1, maxTokens)
	m.addedLargest = max(m.addedLargest, n)
}

// eventType returns the event's type: the JSON "type" field when present
// (OpenAI and Anthropic always send it, matching the SSE event name; the
// last one when it is named twice, see lastGet), else the SSE event name.
func eventTypeOf(root gjson.Result, eventType []byte) string {
	if t := lastGet(root, "type"); t.Type == gjson.String {
		return t.Str
	}
	return string(bytes.TrimSpace(eventType))
}

// cloneText is r's text, not aliasing the event data, when r is a string.
func cloneText(r gjson.Result) string {
	if r.Type != gjson.String || r.Str == "" {
		return ""
	}
	return strings.Clone(r.Str)
}
