package weigher

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// The functions here are the stream column of the kind table (kind.go): each
// reads one SSE event of its kind into s and says what the event held.

// chatEvent reads one chat completions chunk
// (https://platform.openai.com/docs/api-reference/chat-streaming); the SSE
// event name is unused.
func (s *Stream) chatEvent(_, data []byte) StreamUpdate { return s.openAIEvent(data, false) }

// completionsEvent reads one legacy completions chunk
// (https://platform.openai.com/docs/api-reference/completions/create): a
// chat chunk whose choices carry text instead of a delta.
func (s *Stream) completionsEvent(_, data []byte) StreamUpdate { return s.openAIEvent(data, true) }

// openAIEvent reads a chat (completions false) or legacy completions chunk;
// the usage of the include_usage chunk is final.
func (s *Stream) openAIEvent(data []byte, completions bool) StreamUpdate {
	if s.skel == nil {
		s.skel = &chunkSkeleton{shared: s.shapes}
	}
	c := s.skel.readChunk(data, completions, s.maxDepth)
	if c.Uncounted && !c.Unread {
		c.Text = uncountedChunkText(data, c.Text)
	}
	s.noteTier(c.ServiceTier)
	if c.HasUsage {
		if s.closed {
			// A second usage: the upstream contradicts itself, keep the
			// dearer reading of the two (a later, smaller usage must not
			// undo a larger one).
			c.Usage = upper(s.usage, c.Usage)
		}
		s.usage, s.has, s.final, s.closed = c.Usage, hasInput|hasOutput, true, true
	}
	return StreamUpdate{Text: c.Text, HasUsage: c.HasUsage, UsageOnly: c.UsageOnly, Err: c.Err, Done: c.Done, Finished: c.Finished, Unread: c.Unread, Uncounted: c.Uncounted}
}

// uncountedChunkText is the text of a chat or legacy completions chunk
// that carried output its reader did not count (Chunk.Uncounted), read as
// a JSON answer's is (chatAnswerText: a choice's message or delta whose
// content is a list of parts, a chat choice's text, an audio transcript),
// when that is longer than counted, the text the reader counted; else
// counted. Read so, a lenient upstream cannot stream its text in one of
// those shapes beside a usage reporting 1 output token and be charged 1
// token: the tap counts the text against the usage as it counts a delta's
// content (TestAdv39UncountedStreamTextIsCharged). The chunk stays
// Uncounted (audio data, an unknown member: without a usage the stream
// keeps its output reservation). data is a chunk the reader checked (not
// Unread), so its nesting is bounded.
func uncountedChunkText(data []byte, counted string) string {
	var j textJoiner
	chatAnswerText(gjson.ParseBytes(data), j.add)
	if t := j.String(); len(t) > len(counted) {
		return t
	}
	return counted
}

// notStreamed is the stream reader of a weighed kind whose API has no
// streaming (embeddings: its request has no stream parameter,
// https://platform.openai.com/docs/api-reference/embeddings/create): it
// reads nothing.
func notStreamed(*Stream, []byte, []byte) StreamUpdate { return StreamUpdate{} }

// responsesEvent reads one Responses streaming event
// (https://platform.openai.com/docs/api-reference/responses-streaming):
// every "*.delta" event with a string "delta" is streamed output (except
// response.audio.delta, base64 audio, which like a partial image is
// Uncounted), and a "*.done" event's text when it repeats no text
// counted for its item (doneTextFields, doneEventText); response.completed,
// response.incomplete and response.failed end the stream with the response
// object, whose usage is final; "error" is an in-band error without usage.
// What response.output_item and response.content_part events (.added,
// which an honest stream sends empty, and .done) hold beyond the text counted is remembered and counted where no
// usage settles the stream (responses_items.go); beside a usage it is the
// terminal event's text, against which the tap checks the usage.
func (s *Stream) responsesEvent(eventType, data []byte) StreamUpdate {
	if s.resp != nil {
		if t, ok := s.resp.match(data, s.maxDepth); ok {
			s.deltaText += len(t)
			s.runText(t)
			return StreamUpdate{Text: t}
		}
	}
	root, ok := parseObject(data, s.maxDepth)
	if !ok {
		return StreamUpdate{Unread: true}
	}
	typ := eventTypeOf(root, eventType)
	idx := eventIndex{root: root}
	if endsText(typ) {
		// The deltas before it are one text.
		s.closeRun(&idx)
	}
	switch typ {
	case "response.completed", "response.incomplete", "response.failed":
		u := StreamUpdate{Done: true, Err: typ == "response.failed"}
		// The response's usage, output and service tier, in one walk of
		// it (the event names no key twice: parseObject).
		var usageV, outputV, tierV, toolUsageV gjson.Result
		if resp := lastGet(root, "response"); resp.IsObject() {
			rawMembers(resp.Raw, func(k string, v gjson.Result) bool {
				switch k {
				case "usage":
					usageV = v
				case "output":
					outputV = v
				case "service_tier":
					tierV = v
				case "tool_usage":
					toolUsageV = v
				}
				return true
			})
		}
		// The tier the response was served at: the terminal event's
		// (response.created's names the tier asked for, "auto" for one).
		s.noteTier(servedTier(tierV.Raw))
		if usage, ok := responsesUsageOf(parsed(usageV)); ok {
			// The text the items, parts and the response's output held
			// that no delta showed (none in an honest stream: its deltas
			// carry it) is the event's text, which the tap checks the
			// usage against as against the deltas' (it counts it only
			// when the usage reports fewer output tokens than the text
			// allows): an upstream that put its text only there beside a
			// usage of 1 output token was charged 1
			// (TestAdv39ResponsesItemTextBesideASmallUsage).
			u.Text, _ = s.unsettledText(parsed(outputV))
			usage.WebSearches, usage.FileSearches = toolCalls(parsed(outputV))
			// The terminal output's images, or the items the stream
			// showed when more, and the partial images.
			images := max(int64(imageGenOf(parsed(outputV), parsed(toolUsageV))), s.images.tokens())
			usage.ImageTokens = int32(min(images+int64(s.partialImages)*partialImageTokens, math.MaxInt32))
			if s.closed {
				usage = upper(s.usage, usage) // a second terminal event: see openAIEvent
			}
			s.usage, s.has, s.final, s.closed = usage, hasInput|hasOutput, true, true
			u.HasUsage = true
			// Beside the usage, nothing more is remembered (the keys of
			// the texts counted are kept: a later output repeating them
			// is no new text).
			s.items.text, s.items.n, s.items.hidden = nil, 0, false
		} else {
			// No usage to settle at: what the stream's text did not show
			// of its output is counted (responses_items.go): what its
			// output_item and content_part events held (itemMemo) and
			// what the response's output holds beyond them. Output not
			// text (encrypted reasoning) is Uncounted.
			u.Text, u.Uncounted = s.unsettledText(parsed(outputV))
		}
		return u
	case "error":
		// An in-band error: no usage is to come (a response.failed after
		// it reads its own), so what the items held is counted now.
		u := StreamUpdate{Err: true}
		u.Text, u.Uncounted = s.unsettledText(gjson.Result{})
		return u
	case "response.output_item.done":
		// Any top-level text is read first (doneEventText), so the item
		// is matched against it. Once a usage came (closed), nothing is
		// remembered: it is never counted beside the usage.
		u := s.doneEventText(root, &idx)
		it := lastGet(root, "item")
		s.noteImageItem(true, it)
		if !s.closed {
			s.items.item(doneItems, &idx, it)
		}
		return u
	case "response.content_part.done", "response.reasoning_summary_part.done":
		u := s.doneEventText(root, &idx)
		if !s.closed {
			s.items.part(doneParts, &idx, lastGet(root, "part"))
		}
		return u
	case "response.output_item.added":
		// Sent empty by an honest stream; text a hostile one puts there
		// is remembered as a done item's is (itemMemo).
		it := lastGet(root, "item")
		s.noteImageItem(false, it)
		if !s.closed {
			s.items.item(addedItems, &idx, it)
		}
		return StreamUpdate{}
	case "response.content_part.added", "response.reasoning_summary_part.added":
		if !s.closed {
			s.items.part(addedParts, &idx, lastGet(root, "part"))
		}
		return StreamUpdate{}
	case "response.image_generation_call.partial_image":
		// Billed image output tokens, not text to count.
		s.partialImages = min(s.partialImages+1, math.MaxInt32/partialImageTokens)
		return StreamUpdate{Uncounted: true}
	case "response.audio.delta":
		// Billed output (audio tokens) that is not text to count.
		return StreamUpdate{Uncounted: true}
	}
	if strings.HasSuffix(typ, ".delta") {
		d := lastGet(root, "delta")
		// The next deltas are read against this one (response_skeleton.go).
		if s.resp == nil {
			s.resp = new(responseSkeleton)
		}
		s.resp.keep(data, lastGet(root, "type"), d, s.maxDepth)
		t := cloneText(d)
		s.deltaText += len(t)
		if typ != s.runType {
			// Deltas of another kind of text: another text.
			s.closeRun(&eventIndex{known: true, i: -1})
			s.runType = strings.Clone(typ)
		}
		s.runText(t)
		return StreamUpdate{Text: t}
	}
	if strings.HasSuffix(typ, ".done") {
		return s.doneEventText(root, &idx)
	}
	return StreamUpdate{}
}

// doneEventText reads a Responses *.done event's text. Such an event
// repeats whole the text its deltas streamed (output_text.done's text,
// refusal.done's refusal, function_call_arguments.done's arguments…). An
// upstream that sends the text only there (no deltas), or a text there
// other than its deltas', would stream output nothing counted: a text
// that repeats none counted or remembered for its item (itemMemo.seen,
// the run of deltas before it among them) is counted.
func (s *Stream) doneEventText(root gjson.Result, idx *eventIndex) StreamUpdate {
	for _, f := range doneTextFields {
		if t := lastGet(root, f); t.Type == gjson.String && t.Str != "" {
			s.doneText += len(t.Str)
			if !s.items.seen(doneTexts, idx.get(), t.Str) {
				s.deltaText += len(t.Str)
				return StreamUpdate{Text: cloneText(t)}
			}
			break
		}
	}
	return StreamUpdate{}
}

// endsText reports whether a Responses event of type typ ends the run of
// deltas before it: a *.done event (output_text.done repeats the text
// its deltas streamed), an output item's or content part's added event
// (the next text begins), an in-band error or a terminal event. Events
// sent between the deltas of one text (output_text.annotation.added, a
// search's progress) do not.
func endsText(typ string) bool {
	switch typ {
	case "response.output_item.added", "response.content_part.added", "response.reasoning_summary_part.added",
		"error", "response.completed", "response.incomplete", "response.failed":
		return true
	}
	return strings.HasSuffix(typ, ".done")
}

// runText adds t, a Responses delta's text, to the run of deltas.
func (s *Stream) runText(t string) {
	if t == "" {
		return
	}
	if s.runLen == 0 {
		s.run.SetSeed(textSeed)
	}
	s.run.WriteString(t)
	s.runLen += len(t)
}

// closeRun ends the run of deltas at an event (idx, its output_index)
// that ends a text: the run is a text the stream counted, which the
// levels match (itemMemo).
func (s *Stream) closeRun(idx *eventIndex) {
	if s.runLen == 0 {
		return
	}
	item := idx.get()
	if h := s.run.Sum64(); !s.items.match(deltaRuns, item, s.runLen, h) {
		s.items.note(deltaRuns, item, s.runLen, h)
	}
	s.runLen = 0
}

// eventIndex is the output_index of a Responses event, read once and only
// when a text needs it (a walk of the event's members): most events hold
// none.
type eventIndex struct {
	root  gjson.Result
	known bool
	i     int
}

// get is the event's output_index (outputIndex).
func (e *eventIndex) get() int {
	if !e.known {
		e.i, e.known = outputIndex(e.root), true
	}
	return e.i
}

// outputIndex is the output_index of a Responses event (root), -1 when it
// names none that is a small whole number.
func outputIndex(root gjson.Result) int {
	v := lastGet(root, "output_index")
	if v.Type != gjson.Number {
		return -1
	}
	if f := v.Float(); f >= 0 && f < 1<<30 && f == float64(int(f)) {
		return int(f)
	}
	return -1
}

// unsettledText is what a Responses stream counts at an event after which
// no usage is to settle it (a terminal event without one, an in-band
// "error"), given out, the response's output (none for an "error"): the
// text its items and parts held beyond what it counted (itemMemo), and
// the text of out's items beyond both (itemMemo.outputText), and whether
// output not text was seen (an encrypted reasoning item), or remembered
// text was left out past itemMemoMax (then Uncounted: the output
// reservation is kept). The text is counted: the memory is emptied, the
// bytes added to deltaText.
func (s *Stream) unsettledText(out gjson.Result) (text string, uncounted bool) {
	m := &s.items
	if s.closed {
		// A usage settles the stream: what the items held is not
		// counted beside it (nor remembered, once it came); the output's
		// text beyond what was counted is (late).
		m.text, m.n = nil, 0
		t, n, hidden := m.outputText(out)
		s.deltaText += n
		return t, hidden
	}
	t, n, hidden := m.outputText(out)
	uncounted = hidden || m.hidden || m.over()
	if m.n > 0 {
		t, n = string(m.text)+t, n+m.n
	}
	s.deltaText += n
	m.counted()
	return t, uncounted
}

// deltaHoldsData reports whether d, a Messages content_block_delta's delta,
// has a member other than "type" that could carry output (mayHoldOutput).
func deltaHoldsData(d gjson.Result) bool {
	holds := false
	d.ForEach(func(k, v gjson.Result) bool {
		if k.Str != "type" && mayHoldOutput(gjson.Result{Type: v.Type, Raw: strings.TrimSpace(v.Raw)}) {
			holds = true
		}
		return !holds
	})
	return holds
}

// deltaStrings is the text of d, a Messages content_block_delta's delta of
// a type messagesEvent does not know (or an event of a type it does not
// know, or a ping, content_block_stop or message_stop, whole): every
// string it holds, at any depth, but its own "type", joined in order
// (keys not counted). A future delta
// that carries its text under a member llmguard does not know
// ({"type":"foo_delta","text":"…"}) is so counted; one that carries opaque
// data (as signature_delta does) is counted as text too, high, never low.
// d was checked by parseObject, so its nesting is bounded.
func deltaStrings(d gjson.Result) string {
	var j textJoiner
	if !d.IsObject() {
		addStrings(d, &j) // a delta sent as a bare string or an array
		return j.String()
	}
	strayStrings(d, &j, "type")
	return j.String()
}

// heldStrings is the text of an event an honest stream sends bare (a
// ping, content_block_stop or message_stop): deltaStrings(root), or ""
// without a walk when data, its bytes, holds no string but its keys and
// its "type" (bareEvent), as an honest one does.
func heldStrings(root gjson.Result, data []byte) string {
	if bareEvent(data) {
		return ""
	}
	return deltaStrings(root)
}

// bareEvent reports, in one pass over its bytes, whether data, an event's
// JSON object (checked by parseObject), holds no string value but its
// "type" member's, and no object or array: false for any other, and for
// any escape (then read whole). The shapes Anthropic sends
// (`{"type":"message_stop"}`, `{"type":"content_block_stop","index":0}`)
// are matched first, at a fifth of the scan's cost (callgrind).
func bareEvent(data []byte) bool {
	if rest, ok := bytes.CutPrefix(data, typeMember); ok {
		if n := bytes.IndexByte(rest, '"'); n >= 0 && bytes.IndexByte(rest[:n], '\\') < 0 {
			rest = rest[n+1:]
			if r, ok := bytes.CutPrefix(rest, indexMember); ok {
				for rest = r; len(rest) > 0 && '0' <= rest[0] && rest[0] <= '9'; {
					rest = rest[1:]
				}
			}
			if len(rest) == 1 && rest[0] == '}' {
				return true
			}
		}
	}
	i := bytes.IndexByte(data, '{')
	if i < 0 || bytes.IndexByte(data, '\\') >= 0 {
		return false
	}
	typeKey := false // the member being read is "type"
	for i++; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			return false
		case '"':
			n := bytes.IndexByte(data[i+1:], '"')
			if n < 0 {
				return false
			}
			str := data[i+1 : i+1+n]
			i += n + 1
			j := i + 1
			for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
				j++
			}
			if j < len(data) && data[j] == ':' { // a key
				typeKey = string(str) == "type"
				i = j
			} else if !typeKey {
				return false // a string value of another member
			}
		}
	}
	return true
}

// compactDelta reports whether data is, byte for byte, the compact
// content_block_delta Anthropic sends,
// {"type":"content_block_delta","index":N,"delta":{"type":dtype,member:t}}
// with t the Result read from data: then it holds no string but those, and
// is not walked for others (strayStrings), a few comparisons instead of
// two walks.
func compactDelta(data []byte, dtype, member string, t gjson.Result) bool {
	data = trimJSONSpace(data)
	rest, ok := bytes.CutPrefix(data, blockDeltaHead)
	if !ok {
		return false
	}
	for len(rest) > 0 && '0' <= rest[0] && rest[0] <= '9' {
		rest = rest[1:]
	}
	if rest, ok = bytes.CutPrefix(rest, deltaTypeHead); !ok {
		return false
	}
	// rest is dtype","member":t}} when compact.
	n := len(dtype) + 3 + len(member) + 2
	if len(rest) != n+len(t.Raw)+2 || offsetIn(data, t.Raw) != len(data)-len(rest)+n {
		return false
	}
	return string(rest[:len(dtype)]) == dtype && string(rest[len(dtype):len(dtype)+3]) == `","` &&
		string(rest[len(dtype)+3:n-2]) == member && string(rest[n-2:n]) == `":` && string(rest[n+len(t.Raw):]) == "}}"
}

// compactMessageDelta reports whether data is, byte for byte, the compact
// message_delta Anthropic sends,
// {"type":"message_delta","delta":{"stop_reason":R,"stop_sequence":null},"usage":U}
// with R null or a documented stop_reason (documentedStopReason) and U the
// usage Result read from data, at most documentedMaxBytes: then it holds
// no string beside those, and is not walked for others (strayStrings,
// oversizedStrings).
func compactMessageDelta(data []byte, usage gjson.Result) bool {
	data = trimJSONSpace(data)
	rest, ok := bytes.CutPrefix(data, messageDeltaHead)
	if !ok {
		return false
	}
	if r, ok := bytes.CutPrefix(rest, []byte("null")); ok {
		rest = r
	} else if len(rest) > 0 && rest[0] == '"' {
		rest = rest[1:]
		n := 0
		for n < len(rest) && ('a' <= rest[n] && rest[n] <= 'z' || rest[n] == '_') {
			n++
		}
		if n == len(rest) || rest[n] != '"' || !documentedStopReason(rest[:n]) {
			return false
		}
		rest = rest[n+1:]
	} else {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest, messageDeltaTail); !ok {
		return false
	}
	return len(rest) == len(usage.Raw)+1 && len(usage.Raw) <= documentedMaxBytes("usage") && offsetIn(data, usage.Raw) == len(data)-len(rest) && rest[len(rest)-1] == '}'
}

// compactMessageStart reports whether data is, byte for byte, the compact
// message_start Anthropic sends,
// {"type":"message_start","message":{"id":I,"type":"message","role":"assistant","content":[],"model":M,"stop_reason":null,"stop_sequence":null,"usage":U}}
// with data holding no backslash (so I and M, strings, end at their first
// quote), I and M each at most framingMaxBytes of JSON, and U the usage
// Result read from data, at most documentedMaxBytes: then it holds no
// string but those (documented), and is not walked for others
// (strayStrings, oversizedStrings).
func compactMessageStart(data []byte, usage gjson.Result) bool {
	data = trimJSONSpace(data)
	rest, ok := bytes.CutPrefix(data, messageStartHead)
	if !ok || bytes.IndexByte(rest, '\\') >= 0 {
		return false
	}
	n := bytes.IndexByte(rest, '"') // the end of the id
	if n < 0 || n+2 > framingMaxBytes {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest[n+1:], messageStartModel); !ok {
		return false
	}
	if n = bytes.IndexByte(rest, '"'); n < 0 || n+2 > framingMaxBytes { // the end of the model
		return false
	}
	if rest, ok = bytes.CutPrefix(rest[n+1:], messageStartTail); !ok {
		return false
	}
	return len(rest) == len(usage.Raw)+2 && len(usage.Raw) <= documentedMaxBytes("usage") && offsetIn(data, usage.Raw) == len(data)-len(rest) && string(rest[len(rest)-2:]) == "}}"
}

// compactBlockStart reports whether data is, byte for byte, the compact
// content_block_start Anthropic sends for an empty text or thinking block
// (btype), {"type":"content_block_start","index":N,"content_block":B}
// with B {"type":"text","text":""} or
// {"type":"thinking","thinking":"","signature":""}: then it holds no
// string, and is not walked.
func compactBlockStart(data []byte, btype string) bool {
	var tail string
	switch btype {
	case "text":
		tail = emptyTextBlockTail
	case "thinking":
		tail = emptyThinkingBlockTail
	default:
		return false
	}
	data = trimJSONSpace(data)
	rest, ok := bytes.CutPrefix(data, blockStartHead)
	if !ok {
		return false
	}
	for len(rest) > 0 && '0' <= rest[0] && rest[0] <= '9' {
		rest = rest[1:]
	}
	return string(rest) == tail
}

// messageStartHead, messageStartModel and messageStartTail are the bytes
// around a compact message_start's id and model (compactMessageStart).
var messageStartHead, messageStartModel, messageStartTail = []byte(`{"type":"message_start","message":{"id":"`),
	[]byte(`,"type":"message","role":"assistant","content":[],"model":"`),
	[]byte(`,"stop_reason":null,"stop_sequence":null,"usage":`)

// blockStartHead is the bytes before a compact content_block_start's
// index, emptyTextBlockTail and emptyThinkingBlockTail those after it
// when it starts an empty block (compactBlockStart).
var blockStartHead = []byte(`{"type":"content_block_start","index":`)

const (
	emptyTextBlockTail     = `,"content_block":{"type":"text","text":""}}`
	emptyThinkingBlockTail = `,"content_block":{"type":"thinking","thinking":"","signature":""}}`
)

// messageMembers are the members of a Messages Message object whose
// strings are not output text: id, type, role, model, usage, container,
// context_management and stop_details (a refusal's explanation), as the
// Messages API documents them (https://docs.anthropic.com/en/api/messages,
// the SDKs' Message type), its content (read as blocks) and stop_reason
// (read by undocumentedStopReason). Its stop_sequence, null in a
// message_start, is counted when a string.
var messageMembers = append(slices.Clip(messageFramingMembers), "content", "stop_reason")

// messageFramingMembers are the members of messageMembers that carry no
// output (all but content and stop_reason), read for text by
// oversizedStrings when longer than Anthropic sends them.
var messageFramingMembers = []string{"id", "type", "role", "model", "usage", "container", "context_management", "stop_details"}

// addStructured adds to j every string v holds (addStrings) when v is an
// object or an array: a member the Messages API sends as a string or
// null (a stop_reason, read as a string by undocumentedStopReason) that
// holds text in another shape.
func addStructured(v gjson.Result, j *textJoiner) {
	if v.IsObject() || v.IsArray() {
		addStrings(v, j)
	}
}

// undocumentedStopReason is v, a Messages stop_reason, when it is a string
// of no value the API documents (end_turn, max_tokens, stop_sequence,
// tool_use, pause_turn, refusal, model_context_window_exceeded:
// https://docs.anthropic.com/en/api/handling-stop-reasons; compaction and
// pause_run, which the SDKs name), else the zero
// Result: a stop_reason carrying text is counted as text.
func undocumentedStopReason(v gjson.Result) gjson.Result {
	if v.Type != gjson.String || documentedStopReason([]byte(v.Str)) {
		return gjson.Result{}
	}
	return v
}

// documentedStopReason reports whether r is a stop_reason value the
// Messages API documents (undocumentedStopReason).
func documentedStopReason(r []byte) bool {
	switch string(r) {
	case "end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "model_context_window_exceeded", "compaction", "pause_run":
		return true
	}
	return false
}

// messageDeltaHead and messageDeltaTail are the bytes around a compact
// message_delta's stop_reason (compactMessageDelta).
var messageDeltaHead, messageDeltaTail = []byte(`{"type":"message_delta","delta":{"stop_reason":`), []byte(`,"stop_sequence":null},"usage":`)

// blockDeltaHead and deltaTypeHead are the bytes around a compact
// content_block_delta's index (compactDelta).
var blockDeltaHead, deltaTypeHead = []byte(`{"type":"content_block_delta","index":`), []byte(`,"delta":{"type":"`)

// strayStrings adds to j every string v, an object, holds (at any depth,
// addStrings) in its members not named in known. v was checked by
// parseObject, so its nesting is bounded.
func strayStrings(v gjson.Result, j *textJoiner, known ...string) {
	if !v.IsObject() {
		return
	}
	v.ForEach(func(k, e gjson.Result) bool {
		if !slices.Contains(known, k.Str) {
			addStrings(e, j)
		}
		return true
	})
}

// oversizedStrings adds to j every string (addStrings) of each member of
// v, an object, named in members whose JSON text is longer than any the
// Messages API sends there (documentedMaxBytes): a lenient upstream may
// write text into an event's documented members, such as a 2,000-word
// message_start id or model, which strayStrings leaves unread. Each
// member of a repeated name is read.
func oversizedStrings(v gjson.Result, j *textJoiner, members ...string) {
	if !v.IsObject() {
		return
	}
	v.ForEach(func(k, e gjson.Result) bool {
		if slices.Contains(members, k.Str) && len(e.Raw) > documentedMaxBytes(k.Str) {
			addStrings(e, j)
		}
		return true
	})
}

// documentedMaxBytes is the most JSON text, in bytes, a documented
// member k of a Messages stream event holds in what Anthropic sends: an
// id, type, role or model framingMaxBytes (a message id is about 30
// bytes, a model name below 64 even as Bedrock or Vertex spell it); a
// usage, container, context_management or stop_details object 1 KiB (a
// usage with every cache, server-tool and tier figure is about 400
// bytes; a refusal's stop_details explanation a sentence).
func documentedMaxBytes(k string) int {
	switch k {
	case "id", "type", "role", "model":
		return framingMaxBytes
	}
	return 1 << 10
}

// addStrings adds to j every string v holds, at any depth, in order.
func addStrings(v gjson.Result, j *textJoiner) {
	if v.Type == gjson.String {
		j.add(v)
		return
	}
	if v.IsObject() || v.IsArray() {
		v.ForEach(func(_, e gjson.Result) bool {
			addStrings(e, j)
			return true
		})
	}
}

// typeMember and indexMember are the bytes with which Anthropic's bare
// events begin their "type" member and name their "index" (bareEvent).
var typeMember, indexMember = []byte(`{"type":"`), []byte(`,"index":`)

// doneTextFields are the members in which a Responses *.done event repeats
// its text (https://platform.openai.com/docs/api-reference/responses-streaming):
// output_text.done, reasoning_text.done and reasoning_summary_text.done
// "text", refusal.done "refusal", function_call_arguments.done and
// mcp_call_arguments.done "arguments", custom_tool_call_input.done "input".
var doneTextFields = []string{"text", "refusal", "arguments", "input"}

// messagesEvent reads one Anthropic Messages streaming event
// (https://platform.claude.com/docs/en/build-with-claude/streaming):
// message_start carries message.usage (input and cache figures, a
// placeholder output), message_delta a cumulative usage, message_stop ends
// the stream (the usage is then final), content_block_delta carries
// text_delta / input_json_delta / thinking_delta output, "error" is an
// in-band error (e.g. overloaded_error).
func (s *Stream) messagesEvent(eventType, data []byte) StreamUpdate {
	if s.delta != nil {
		if u, ok := s.delta.match(eventType, data, s.maxDepth); ok {
			return u
		}
	}
	root, ok := parseObject(data, s.maxDepth)
	if !ok {
		return StreamUpdate{Unread: true}
	}
	switch eventTypeOf(root, eventType) {
	case "message_start":
		usage := lastGet(root, "message", "usage")
		u := s.anthropicUsage(usage)
		// Its message's content is [] (the blocks stream after it): an
		// answer whose content arrives here is output the deltas do not
		// carry, read as a JSON answer's blocks are (its text counted;
		// still Uncounted: a block may hold what no reader counts).
		var j textJoiner
		content := lastGet(root, "message", "content")
		if u.Uncounted = mayHoldOutput(content); u.Uncounted {
			messagesBlocksText(content, j.add)
		}
		if !compactMessageStart(data, usage) {
			// Strings in members the API does not send (beside the
			// message, or in it beside those a Message documents), a
			// stop_sequence (null in an honest message_start) and a
			// stop_reason of no documented value: text the caller got,
			// counted against the usage (2,000 words so beside a usage
			// of 1 output token were charged 9 tokens,
			// TestAdv43StrayMessageStartStringsAreCharged).
			msg := lastGet(root, "message")
			strayStrings(root, &j, "type", "message")
			strayStrings(msg, &j, messageMembers...)
			j.add(undocumentedStopReason(lastGet(msg, "stop_reason")))
			// The documented members but content and stop_reason, when
			// longer than any Anthropic sends (a 2,000-word id or model):
			// text too (TestAdv44OversizedMessageStartMembersAreCharged).
			oversizedStrings(root, &j, "type")
			oversizedStrings(msg, &j, messageFramingMembers...)
			addStructured(lastGet(msg, "stop_reason"), &j)
		}
		u.Text = j.String()
		return u
	case "message_delta":
		usage := lastGet(root, "usage")
		// Read as anthropicUsage reads it: a number, 0 included (a string
		// is not merged, so it must not make the placeholder final
		// either). The first message_delta's count replaces
		// message_start's placeholder (0 or 1) rather than joining the
		// running maximum: an answer that ends reporting 0 is settled at
		// 0, floored at its streamed text (usageTap.settle), never at the
		// placeholder.
		if f := lastGet(usage, "output_tokens"); f.Type == gjson.Number {
			if _, ok := outputCount(f); ok {
				if !s.deltaOutput {
					s.anth.output = 0
				}
				s.deltaOutput = true
			}
		}
		u := s.anthropicUsage(usage)
		// message_delta comes after the content blocks: its count is meant
		// to be the last (text after it makes the stream late, Event).
		s.closed = s.closed || u.HasUsage
		if !compactMessageDelta(data, usage) {
			// Strings in members the API does not send (its delta's
			// stop_reason, stop_sequence, stop_details and container, its
			// usage and context_management are): text the caller got,
			// counted against the usage beside them
			// (TestAdv41StrayMessageDeltaStringsAreCharged).
			// A stop_sequence string (the caller's own, which the model
			// wrote) and a stop_reason of no documented value are
			// counted too, high, never low: a 2,000-word stop_sequence
			// was not read (TestAdv43StrayMessageStartStringsAreCharged).
			var j textJoiner
			d := lastGet(root, "delta")
			strayStrings(root, &j, "type", "delta", "usage", "context_management")
			strayStrings(d, &j, "stop_reason", "stop_details", "container")
			oversizedStrings(root, &j, "type", "usage", "context_management")
			oversizedStrings(d, &j, "stop_details", "container")
			addStructured(lastGet(d, "stop_reason"), &j)
			j.add(undocumentedStopReason(lastGet(d, "stop_reason")))
			u.Text = j.String()
		}
		return u
	case "message_stop":
		// The output is reported by a message_delta (message_start's is a
		// placeholder: a stream without one would settle its text at 1
		// token). An unread event may have been a message_delta with a
		// larger cumulative count than the last one read (and text after
		// a message_delta keeps the usage from being final: Event). The
		// input must have been reported too (message_start's input_tokens
		// or a cache field), as a Messages answer's usage must report both
		// (parseMessagesUsage): a usage whose input figure is missing, a
		// string or negative would otherwise settle the whole prompt at 0.
		s.final = s.deltaOutput && s.has&(hasInput|hasOutput) == hasInput|hasOutput && !s.unread
		s.closed = true
		// Sent with no string but its "type" (Bedrock adds its metrics,
		// numbers): a string it holds is text the usage before it does
		// not cover (late, Event), counted as a ping's is.
		return StreamUpdate{Done: true, Text: heldStrings(root, data)}
	case "content_block_delta":
		d := lastGet(root, "delta")
		var member string // the delta's member that carries its text
		dtype := lastGet(d, "type").String()
		switch dtype {
		case "text_delta":
			member = "text"
		case "input_json_delta":
			member = "partial_json"
		case "thinking_delta":
			member = "thinking"
		case "citations_delta":
			// A citation's text is not output (Anthropic: cited_text does
			// not count towards output tokens).
			return StreamUpdate{}
		case "signature_delta":
			// A thinking block's signature: the block's thinking, billed
			// as output in full, streams as a summary of it (Claude 4
			// and later) or not at all (display "omitted", Opus 4.7's
			// default: only this signature carries it), so a signature
			// that holds data marks output llmguard cannot count, as a
			// redacted_thinking block does.
			return StreamUpdate{Uncounted: deltaHoldsData(d)}
		default:
			// A delta of a type llmguard does not know that holds data:
			// output it cannot count (without a usage the output
			// reservation stands), and its string text, counted as a
			// delta's text is, so that a usage it contradicts is charged
			// the text (TestAdv40UnknownMessagesDeltaTextIsCharged).
			if !deltaHoldsData(d) {
				return StreamUpdate{}
			}
			return StreamUpdate{Text: deltaStrings(d), Uncounted: true}
		}
		t := lastGet(d, member)
		if !compactDelta(data, dtype, member, t) {
			// Strings in members the API does not send beside the text
			// ({"type":"text_delta","text":"hi","x":"…"}, or beside the
			// delta) are text the caller got: counted with it, and the
			// event kept from the skeleton (whose fast path counts only
			// the text) (TestAdv41StrayDeltaStringsAreCharged).
			var j textJoiner
			j.add(t)
			strayStrings(root, &j, "type", "index", "delta")
			strayStrings(d, &j, "type", member)
			if j.n > 1 || (j.n == 1 && j.first != t.Str) {
				return StreamUpdate{Text: j.String()}
			}
		}
		// The next deltas of the block are read against this one
		// (delta_skeleton.go).
		if s.delta == nil {
			s.delta = new(deltaSkeleton)
		}
		s.delta.keep(eventType, data, t, s.maxDepth)
		return StreamUpdate{Text: cloneText(t)}
	case "content_block_start":
		b := lastGet(root, "content_block")
		btype := lastGet(b, "type").String()
		// Strings beside the block (its "index" is a number) or, in a
		// text or thinking block, beside the members it documents, are
		// text the caller got: counted, unless the event is the compact
		// one Anthropic sends (compactBlockStart); 2,000 words so beside
		// a usage of 1 output token were charged 9 tokens
		// (TestAdv43StrayBlockStartStringsAreCharged).
		var j textJoiner
		compact := compactBlockStart(data, btype)
		if !compact {
			strayStrings(root, &j, "type", "index", "content_block")
		}
		switch btype {
		case "text":
			j.add(lastGet(b, "text"))
			if !compact {
				// A text block's citations are not output (cited_text
				// does not count towards output tokens).
				strayStrings(b, &j, "type", "text", "citations")
			}
			return StreamUpdate{Text: j.String()}
		case "thinking":
			j.add(lastGet(b, "thinking"))
			if !compact {
				strayStrings(b, &j, "type", "thinking", "signature")
			}
			// A signature that holds data at the block's start marks
			// thinking llmguard cannot count, as a signature_delta does.
			return StreamUpdate{Text: j.String(), Uncounted: !compact && mayHoldOutput(lastGet(b, "signature"))}
		case "redacted_thinking":
			// Encrypted thinking, billed as output: nothing to count
			// but strings beside the block.
			return StreamUpdate{Text: j.String(), Uncounted: true}
		}
		// A tool_use (server_tool_use, mcp_tool_use…) block starts with
		// "input": {} and streams its input as input_json_delta; one
		// whose input arrives whole here is output no delta carries:
		// Uncounted, and a tool_use block's name and input counted as a
		// JSON answer's (messagesBlockText).
		// A block of another type (one llmguard does not know, a tool
		// result) is read as a JSON answer's is for its "text" and
		// "thinking", which no block of a type the API documents holds at
		// its top, so an honest stream counts nothing here
		// (TestAdv40UnknownMessagesDeltaTextIsCharged). A tool-use
		// block's name, which the model wrote (its output, which no delta
		// repeats), is counted too: 2,000 words named so beside a usage
		// of 1 output token were charged 1 (TestAdv41ToolNameIsCharged).
		uncounted := mayHoldOutput(lastGet(b, "input"))
		if uncounted {
			messagesBlockText(b, j.add)
		} else {
			j.add(lastGet(b, "text"))
			j.add(lastGet(b, "thinking"))
			j.add(lastGet(b, "name"))
		}
		return StreamUpdate{Text: j.String(), Uncounted: uncounted}
	case "error":
		// An in-band error (overloaded_error): its message is no output.
		// Once the answer began (a usage read: message_start's), every
		// string it holds but its types is counted, high (an honest
		// error's "Overloaded", 1 to 2 tokens), never low: 2,000 words
		// in its message beside a usage of 1 output token were charged
		// 9 tokens (TestAdv43ErrorTextIsCharged). An error before
		// message_start is refunded as an error status is, whatever
		// its body says.
		u := StreamUpdate{Err: true}
		if s.has != 0 {
			var j textJoiner
			strayStrings(root, &j, "type", "error")
			if e := lastGet(root, "error"); e.IsObject() {
				strayStrings(e, &j, "type")
			} else {
				addStrings(e, &j)
			}
			u.Text = j.String()
		}
		return u
	case "content_block_stop", "ping":
		// Sent with no string but their "type" (a stop's "index" is a
		// number): a string one holds is text the caller got that no
		// usage need cover, counted as an unknown event's
		// (TestAdv41UnknownMessagesEventTextIsCharged).
		return StreamUpdate{Text: heldStrings(root, data)}
	default:
		// An event of a type the Messages API does not send (an OpenAI
		// chunk from a gateway answering in the other dialect, a type
		// llmguard does not know) that holds data: output it cannot
		// count (without a usage the output reservation stands), and its
		// string text, every string but its "type", counted as a delta's
		// text is, so that a usage it contradicts is charged the text, high
		// (an id, a model name are counted too), never low: such an event
		// carrying 2,000 words beside a usage of 1 output token was
		// charged 1 (TestAdv41UnknownMessagesEventTextIsCharged).
		if !deltaHoldsData(root) {
			return StreamUpdate{}
		}
		return StreamUpdate{Text: deltaStrings(root), Uncounted: true}
	}
}

// upper is the dearer reading of two usages the same stream reported:
// every figure at its larger value, except the cached input (priced below
// ordinary input) at its smaller, so that it costs at least as much as
// either. Its cached and cache-write parts never exceed its input.
func upper(a, b Usage) Usage {
	return Usage{
		InputTokens:        max(a.InputTokens, b.InputTokens),
		CachedInputTokens:  min(a.CachedInputTokens, b.CachedInputTokens),
		CacheWriteTokens:   max(a.CacheWriteTokens, b.CacheWriteTokens),
		CacheWrite1hTokens: max(a.CacheWrite1hTokens, b.CacheWrite1hTokens),
		OutputTokens:       max(a.OutputTokens, b.OutputTokens),
		ReasoningTokens:    max(a.ReasoningTokens, b.ReasoningTokens),
		AudioInputTokens:   max(a.AudioInputTokens, b.AudioInputTokens),
		AudioOutputTokens:  max(a.AudioOutputTokens, b.AudioOutputTokens),
		WebSearches:        max(a.WebSearches, b.WebSearches),
		FileSearches:       max(a.FileSearches, b.FileSearches),
		ImageTokens:        max(a.ImageTokens, b.ImageTokens),
		SearchContext:      max(a.SearchContext, b.SearchContext),
		ServiceTier:        joinTiers(a.ServiceTier, b.ServiceTier),
		BilledMicroUSD:     max(a.BilledMicroUSD, b.BilledMicroUSD),
	}
}

// UpperUsage is the dearer reading of two usages one answer reports (two
// "usage" members of a JSON answer relayed unread, which parsers read
// first-wins or last-wins, so the upstream may have billed either): every
// figure at its larger value, in tokens, except the cached input (priced
// below ordinary input) at its smaller, and their service tiers joined
// (JoinServedTiers), so that it costs at least as much as either.
func UpperUsage(a, b Usage) Usage { return upper(a, b) }

// anthropicUsage folds a message_start or message_delta usage object in:
// s.anth keeps the largest of each figure reported, s.usage their
// normalised sum.
func (s *Stream) anthropicUsage(v gjson.Result) StreamUpdate {
	read := s.anth.merge(v) // may take a cache_creation split even when false
	s.usage, s.has = s.anth.usage(), s.anth.has
	if !read {
		return StreamUpdate{}
	}
	return StreamUpdate{HasUsage: true}
}
