package weigher

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// dupKeyEvent reads an SSE event whose data is valid JSON, nested at most
// the stream's limit, that names a key twice in some object (a usage
// object with "completion_tokens" twice, "usage" twice…): the shape the
// event readers refuse as Unread, which settled such a stream at its
// output reservation even when either reading reports more. As
// dupKeyUsage does for a JSON answer, the data is rewritten both ways
// (first wins, as gjson and some upstreams read it; last wins, as
// Python's json, encoding/json and most SDKs do), each rewrite is read by
// the stream's reader on a copy of the stream, and the two copies are
// folded into s at their dearer reading (dupKeyMerge). ok is false, and s
// untouched, when data is not such a document: the event stays Unread.
//
// Memory: one rewrite buffer of len(data) bytes, which the SSE reader
// bounds (sse.MaxEventBytes); the copies' own fast-path skeletons are
// dropped, so nothing of data outlives the call.
func (s *Stream) dupKeyEvent(read func(*Stream, []byte, []byte) StreamUpdate, eventType, data []byte) (StreamUpdate, bool) {
	if len(data) > maxDupUsageBytes ||
		jsonscan.ReasonOf(jsonscan.Check(data, jsonscan.Options{MaxDepth: s.maxDepth, DuplicateKeys: true})) != jsonscan.DuplicateKey ||
		jsonscan.Check(data, jsonscan.Options{MaxDepth: s.maxDepth}) != nil {
		return StreamUpdate{}, false
	}
	root := gjson.Parse(bodyString(bytes.TrimSpace(data)))
	if !root.IsObject() {
		return StreamUpdate{}, false
	}
	buf := make([]byte, 0, len(data))
	a, b := s.reading(), s.reading()
	ua := read(&a, eventType, dedupeKeys(buf, root, false))
	ub := read(&b, eventType, dedupeKeys(buf[:0], root, true)) // ua's Text is a copy: buf may be reused
	s.dupKeyMerge(&a, &b)
	u := StreamUpdate{
		Text:     ua.Text,
		HasUsage: ua.HasUsage || ub.HasUsage,
		// Dropped (when the proxy asked for usage) only when both
		// readings are a usage-only chunk.
		UsageOnly: ua.UsageOnly && ub.UsageOnly,
		Err:       ua.Err || ub.Err,
		Done:      ua.Done || ub.Done,
		// A choice ended only when both readings end it (an end not
		// seen keeps the stream's output reservation: Stream.Ended).
		Finished:  bothEnded(ua.Finished, ub.Finished),
		Uncounted: ua.Uncounted || ub.Uncounted,
		// Readings that disagree on whether the event reports a usage:
		// the one that does may be what the upstream billed, or not; the
		// stream is then charged at least its output reservation, as for
		// an event not read, and at least what the reading reports.
		Unread: ua.Unread || ub.Unread || ua.HasUsage != ub.HasUsage,
	}
	if len(ub.Text) > len(u.Text) {
		u.Text = ub.Text
	}
	if u.Unread {
		s.unread = true
		s.final = false
		s.disputed = s.disputed || ua.HasUsage != ub.HasUsage
	}
	return u, true
}

// reading is a copy of s to read one rewrite of an event on: its
// fast-path skeletons (and the shapes shared with other streams) are left
// out, so that the rewrite neither reads through nor changes them.
func (s *Stream) reading() Stream {
	c := *s
	c.skel, c.delta, c.resp, c.shapes = nil, nil, nil, nil
	c.items = s.items.clip() // an append to the copy's does not write into s's
	return c
}

// dupKeyMerge folds a and b, s read on two rewrites of one event
// (dupKeyEvent), into s at their dearer reading: every usage figure at
// the larger of the two (upper; a Messages stream's raw figures each at
// their larger, then normalised), a usage final only when both readings
// made it final, the stream closed or late when either did, the image
// items seen at the larger count. s keeps its own skeletons.
func (s *Stream) dupKeyMerge(a, b *Stream) {
	skel, delta, resp, shapes := s.skel, s.delta, s.resp, s.shapes
	*s = *a
	s.skel, s.delta, s.resp, s.shapes = skel, delta, resp, shapes
	s.anth = a.anth.upper(b.anth)
	if s.kind == KindMessages {
		s.usage = s.anth.usage()
	} else {
		s.usage = upper(a.usage, b.usage)
	}
	s.has = a.has | b.has
	s.final = a.final && b.final
	s.closed = a.closed || b.closed
	s.late = a.late || b.late
	s.unread = a.unread || b.unread
	s.deltaOutput = a.deltaOutput || b.deltaOutput
	s.deltaText, s.doneText = max(a.deltaText, b.deltaText), max(a.doneText, b.doneText)
	s.images = a.images.upper(b.images)
	if b.items.n > a.items.n {
		s.items = b.items // the reading that remembers more
	}
	s.tier = joinTiers(a.tier, b.tier)
}

// upper is the larger of each figure of a and b, as reported (merge keeps
// each at its largest across events too).
func (a anthropicUsage) upper(b anthropicUsage) anthropicUsage {
	return anthropicUsage{
		input: max(a.input, b.input), cacheWrite: max(a.cacheWrite, b.cacheWrite), cacheRead: max(a.cacheRead, b.cacheRead),
		cache1h: max(a.cache1h, b.cache1h), output: max(a.output, b.output), searches: max(a.searches, b.searches),
		billed: max(a.billed, b.billed), has: a.has | b.has,
	}
}

// bothEnded are the indexes of a that b holds too, in a's order: the
// choices two readings of one event both ended. Linear in a and b.
func bothEnded(a, b ChoiceEnds) ChoiceEnds {
	if a.Len() == 0 || b.Len() == 0 {
		return ChoiceEnds{}
	}
	var inB [MaxEndedChoices / 64]uint64
	for k := range b.Len() {
		i := b.At(k)
		inB[i/64] |= 1 << (i % 64)
	}
	var both []byte
	for k := range a.Len() {
		if i := a.At(k); inB[i/64]&(1<<(i%64)) != 0 {
			both = appendChoiceEnd(both, i)
		}
	}
	return ChoiceEnds{string(both)}
}
