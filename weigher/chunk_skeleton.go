package weigher

import (
	"bytes"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// A streamed chat or completions answer is a run of chunks, one per token
// or so, that differ only in the text they carry (and, in OpenAI's streams
// since 2025, a random "obfuscation" string): every other byte — ids,
// model, the choices array, its nesting and keys — repeats. Reading each
// chunk in full (parseOpenAIChunk: jsonscan.Check with duplicate keys and a
// layout, then the walk) costs some 14k instructions per 230-byte chunk;
// comparing it with the last one read in full costs a tenth of that.
//
// A skeleton (chunkShape) is such a chunk read in full: its bytes and
// where its value strings and numbers lie. A new chunk takes the fast path
// (match) only when its bytes equal the skeleton's everywhere outside the
// contents of value strings and outside numbers (keys included: they are
// compared as bytes), each string that stands in its place passes
// jsonscan.CheckString and each number jsonscan.CheckNumber (the rules
// Check applies). Such a chunk passes the same Check the skeleton passed —
// the same tokens in the same order, with the same nesting and keys, only
// string and number values (valid ones) swapped — and the walk over it
// makes the same choices (which it makes on keys and value types, never on
// string contents or number values, but for the emptiness of a string a
// delta member the walk does not know holds: mayHoldOutput). So its Chunk
// is the skeleton's with Text made from the text-bearing strings (those
// the full walk added to Text, recorded by it in the order it added them),
// provided no other string changed emptiness. The one place the walk reads
// numbers is a top-level "usage" object: a skeleton with one (the
// include_usage chunk) holds where it lies, and match reads the new
// chunk's object with usageOf as the walk does. Numbers in a top-level
// "error" member are compared as bytes, and a string in "usage" or "error"
// keeps the chunk from being a skeleton. Any doubt, and the full parse
// reads the chunk: a skeleton is kept only from a chunk read in full that
// carried no error, was not [DONE] nor unread; a chunk that does not match
// is read in full and becomes the skeleton when it may serve as one. Any
// chunk that passed in full may serve: a match is exact whichever earlier
// chunk the skeleton holds, and a chunk that matched one serves as it does
// (chunkSkeleton.rebase).
//
// Sharing: a response's first chunk of each shape (the role chunk, the
// first content chunk, the finish chunk, the usage chunk) would be read in
// full, one skeleton making way for the next. A Weigher keeps the last
// chunkShapesSlots skeletons its streams built (chunkShapes), immutable
// once shared, and a stream whose skeleton does not match tries them
// (another response's ids, "created" and figures differ only in strings
// and numbers); the one that matches is copied, rebased on the matching
// chunk, as the stream's own.
//
// Memory: per stream some 0.5 KiB of scratch, plus one rebased skeleton
// (at most maxSkeletonBytes of chunk plus 0.4 KiB) once one served, and
// one per chunk read in full that may serve (also shared); per Weigher at
// most chunkShapesSlots skeletons. Time: a match compares at most
// len(skeleton)+len(chunk) bytes once per skeleton tried (a mismatch stops
// at the first differing byte), at most 1+chunkShapesSlots skeletons;
// building a skeleton is one pass over the chunk. None is more than linear
// in the chunk, which is at most maxSkeletonBytes, whatever an upstream
// sends.

// maxSkeletonBytes is the largest chunk (after trimming space) that may be
// a skeleton or be matched against one: OpenAI's chunks are 150-400 bytes.
const maxSkeletonBytes = 4 << 10

// maxSkeletonStrings is the most value strings and numbers a skeleton may
// hold: a plain content chunk holds 4-8 strings (id, object, model,
// fingerprint, content, obfuscation…) and 2 numbers (created, index), a
// parallel tool-call chunk a few more per call; numbers beyond it are
// compared as bytes.
const maxSkeletonStrings = 64

// chunkShape is a chat or completions chunk read in full that may serve as
// a skeleton (see the comment above), with where its tolerated tokens lie.
// One shared through a Weigher's chunkShapes is never changed (a stream's
// own, chunkSkeleton.own, is rewritten as the stream goes). Safe for
// concurrent reads.
type chunkShape struct {
	// prev is the chunk, space trimmed (≤ maxSkeletonBytes).
	prev []byte
	// completions and maxDepth are how prev was read (parseOpenAIChunk's
	// arguments); a chunk read otherwise does not match.
	completions bool
	maxDepth    int
	// toks are prev's tolerated tokens in document order: every value
	// string (not keys) but those of a top-level "service_tier", quotes
	// included, and, while room remains, the numbers outside a top-level
	// "usage", "error" or "service_tier" member and those in a top-level
	// "usage" object (bit k of isNum set for a number): toks[:ntoks].
	toks  [maxSkeletonStrings]tokSpan
	ntoks int
	isNum uint64
	// text are the indices in toks of the strings the walk added to Text,
	// in the order it added them: text[:ntext]; isText has bit k set for
	// each of them.
	text   [maxSkeletonStrings]uint8
	ntext  int
	isText uint64
	// lead is how many tokens come before the first text string (all of
	// them when there is none): match compares them at once.
	lead int
	// uncounted is prev's Chunk.Uncounted.
	uncounted bool
	// fin are the choices prev ended (Chunk.Finished), in order: for each,
	// the index in toks of its "index" number, or -1 for a choice without
	// one (choice 0): fin[:nfin]. A chunk that matches ends the same
	// choices of the walk's (each finish_reason keeps its type: null, a
	// literal, compares as bytes, a string stays a string and a number a
	// number), under the indexes it holds there, read again by
	// choiceIndex.
	fin  [maxSkeletonStrings]int8
	nfin int
	// usage is where prev's top-level "usage" object lies ([start, end),
	// its braces compared as bytes), when prev carried one (a usage
	// chunk: its numbers are tolerated, and read again by usageOf for
	// each chunk matched); usageOnly is prev's Chunk.UsageOnly.
	usage     tokSpan
	hasUsage  bool
	usageOnly bool
	// tier is prev's Chunk.ServiceTier: its top-level service_tier is
	// compared as bytes, so a chunk that matches names the same.
	tier string
}

// tokSpan is where a token lies in a chunk: [start, end) in bytes (a
// chunk read against a skeleton is at most maxSkeletonBytes long).
type tokSpan struct{ start, end uint16 }

// chunkSkeleton reads one stream's chat or completions chunks against the
// last shape that served (its own, or one a Weigher's chunkShapes shares).
// The zero value holds no skeleton and shares none. Not safe for
// concurrent use.
type chunkSkeleton struct {
	// shape is the skeleton the next chunk is matched against first; nil:
	// none yet.
	shape *chunkShape
	// shared are the shapes other streams of the same Weigher built, tried
	// when shape does not match, and given the shapes this stream builds;
	// nil: none. slot is the shared slot to try first (the one after the
	// last that served: a stream meets its shapes in the order another
	// stream shared them).
	shared *chunkShapes
	slot   int
	// own is this stream's skeleton when it is not one shared: a shared
	// shape rebased on the chunk that matched it (the stream's own ids then
	// compare as bytes), or, without shared, the last chunk built. Held
	// here, not apart, to spare a stream an allocation.
	own chunkShape
	// data is the chunk being read in full, and at[:nat] the offsets in it
	// of the string values the walk added to Text (noteText), more than
	// maxSkeletonStrings setting over: the recorder parseOpenAIChunk fills.
	data []byte
	at   [maxSkeletonStrings]uint16
	nat  int
	over bool
	// fin[:nfin] are the offsets in data of the "index" values of the
	// choices the walk found finished, in order, -1 for one without an
	// index (noteFinished).
	fin  [maxSkeletonStrings]int32
	nfin int
	// cur is where match found the new chunk's tokens.
	cur [maxSkeletonStrings]tokSpan
}

// noteText records that the walk added the string value raw, which lies in
// r.data, to Text; nothing when r is nil.
func (r *chunkSkeleton) noteText(raw string) {
	if r == nil || raw == "" {
		return
	}
	off := offsetIn(r.data, raw)
	if off < 0 || off > maxSkeletonBytes || r.nat == len(r.at) {
		r.over = true // not in the chunk (never so) or too many: no skeleton
		return
	}
	r.at[r.nat] = uint16(off)
	r.nat++
}

// noteFinished records that the walk found a choice with a finish_reason
// that is not null, whose "index" member's value is raw ("" when it has
// none), which lies in r.data: a skeleton must read that index again in
// each chunk it matches (see finIdx); nothing when r is nil.
func (r *chunkSkeleton) noteFinished(raw string) {
	if r == nil {
		return
	}
	off := -1 // no index: choice 0
	if raw != "" {
		if off = offsetIn(r.data, raw); off < 0 || off > maxSkeletonBytes {
			r.over = true // not in the chunk: never so
			return
		}
	}
	if r.nfin == len(r.fin) {
		r.over = true // too many: no skeleton
		return
	}
	r.fin[r.nfin] = int32(off)
	r.nfin++
}

// readChunk is parseOpenAIChunk(data, completions, maxDepth) through sk:
// a chunk shaped as sk's skeleton, or as one of the shared shapes, is read
// by match, any other in full (and kept, and shared, as the skeleton when
// it may serve as one).
func (sk *chunkSkeleton) readChunk(data []byte, completions bool, maxDepth int) Chunk {
	data = bytes.TrimSpace(data)
	if c, ok := sk.match(data, completions, maxDepth); ok {
		return c
	}
	if len(data) > maxSkeletonBytes || len(data) < 2 || data[0] != '{' {
		return parseOpenAIChunk(data, completions, maxDepth)
	}
	sk.data, sk.nat, sk.nfin, sk.over = data, 0, 0, false
	c := parseOpenAIChunkRec(data, completions, maxDepth, sk)
	sk.data = nil
	if sh := sk.build(data, c, completions, maxDepth); sh != nil {
		sk.shape = sh
		sk.shared.add(sh)
	}
	return c
}

// build returns data, a chunk parseOpenAIChunk read as c recording its
// text strings in sk.at, as a new shape, when it may serve as one: c
// carried no usage, error or [DONE] and was read; each choice it ended
// has no index or one that is a number it tolerates; it has at most
// maxSkeletonStrings value strings, none inside a top-level "usage" or
// "error" member (nor under a top-level key holding an escape), and every
// string the walk added to Text is one of them. Otherwise nil (the stream
// keeps the skeleton it held: a chunk an odd one interrupts, such as an
// unreadable chunk, is still read on the fast path after it).
func (sk *chunkSkeleton) build(data []byte, c Chunk, completions bool, maxDepth int) *chunkShape {
	if c.Unread || c.Done || c.Err || sk.over {
		return nil
	}
	if (c.HasUsage || c.UsageOnly) && sk.shared == nil {
		// A stream's usage chunk comes once: its skeleton serves only
		// other streams.
		return nil
	}
	toks := &sk.cur // scratch until data is known to serve
	n, depth, isNum := 0, 0, uint64(0)
	// guarded: the top-level member being read is "usage" or "error";
	// inUsage: it is "usage", whose object (when it is one) lies at
	// usage; fixed: it is "service_tier", whose value is compared as
	// bytes (a chunk naming another tier is read in full, which reads it).
	guarded, inUsage, fixed := false, false, false
	usage, hasUsage := tokSpan{}, false
	for i := 0; i < len(data); i++ {
		switch b := data[i]; {
		case b == '{' || b == '[':
			if depth == 1 && inUsage && b == '{' {
				usage.start, hasUsage = uint16(i), true
			}
			depth++
		case b == '}' || b == ']':
			depth--
			if depth == 1 && inUsage && hasUsage && usage.end == 0 {
				usage.end = uint16(i + 1)
			}
		case b == '-' || b >= '0' && b <= '9':
			// A number (keys are strings, literals hold no digits): its
			// value is never read outside usage and error (the walk reads
			// only its type), so any other valid number may stand in its
			// place, while room remains; otherwise it is compared as bytes.
			// In the usage object it may too: match reads the object again.
			end, r := jsonscan.CheckNumber(data, i)
			if r != jsonscan.OK {
				return nil // never: data passed Check
			}
			if !fixed && (!guarded || inUsage && hasUsage && usage.end == 0) && n < maxSkeletonStrings {
				toks[n] = tokSpan{uint16(i), uint16(end)}
				isNum |= 1 << n
				n++
			}
			i = end - 1
		case b == '"':
			end := jsonscan.Skip(data, i)
			if end < 0 {
				return nil // never: data passed Check
			}
			j := end
			for j < len(data) && isJSONSpace(data[j]) {
				j++
			}
			if j < len(data) && data[j] == ':' { // a key
				if depth == 1 {
					k := data[i+1 : end-1]
					if bytes.IndexByte(k, '\\') >= 0 {
						return nil
					}
					inUsage = string(k) == "usage"
					guarded = inUsage || string(k) == "error"
					fixed = string(k) == "service_tier"
				}
			} else if !fixed {
				if guarded {
					return nil
				}
				if n == maxSkeletonStrings {
					// Make room: the last number held becomes bytes to
					// compare (a string must be tolerated).
					if isNum == 0 {
						return nil
					}
					k := 63 - bits.LeadingZeros64(isNum)
					copy(toks[k:], toks[k+1:n])
					isNum = isNum&(1<<k-1) | isNum>>(k+1)<<k
					n--
				}
				toks[n] = tokSpan{uint16(i), uint16(end)}
				n++
			}
			i = end - 1
		}
	}
	if (c.HasUsage || c.UsageOnly) && (!hasUsage || usage.end == 0) {
		return nil // a usage that is not an object: never so
	}
	var text [maxSkeletonStrings]uint8
	isText := uint64(0)
	for i, off := range sk.at[:sk.nat] {
		k, found := slices.BinarySearchFunc(toks[:n], off, func(s tokSpan, off uint16) int { return int(s.start) - int(off) })
		if !found || isNum&(1<<k) != 0 {
			return nil
		}
		text[i] = uint8(k)
		isText |= 1 << k
	}
	// Each finished choice's index is a number tolerated (one compared as
	// bytes, or not a number, and the chunk is no skeleton).
	var fin [maxSkeletonStrings]int8
	for i, off := range sk.fin[:sk.nfin] {
		if off < 0 {
			fin[i] = -1
			continue
		}
		k, found := slices.BinarySearchFunc(toks[:n], uint16(off), func(s tokSpan, off uint16) int { return int(s.start) - int(off) })
		if !found || isNum&(1<<k) == 0 {
			return nil
		}
		fin[i] = int8(k)
	}
	// A shape to share is new (shared ones never change); else the
	// stream's own is reused, its bytes too.
	sh, prev := &sk.own, append(sk.own.prev[:0], data...)
	if sk.shared != nil {
		sh, prev = new(chunkShape), slices.Clone(data)
	}
	lead := n
	for _, k := range text[:sk.nat] {
		lead = min(lead, int(k))
	}
	*sh = chunkShape{
		prev: prev, completions: completions, maxDepth: maxDepth,
		toks: *toks, ntoks: n, isNum: isNum, text: text, ntext: sk.nat, isText: isText, lead: lead,
		uncounted: c.Uncounted, fin: fin, nfin: sk.nfin, usage: usage, hasUsage: hasUsage, usageOnly: c.UsageOnly,
		tier: c.ServiceTier,
	}
	return sh
}

// match reads data (space trimmed) on the fast path when it has the shape
// of sk's skeleton or of a shared one (see the comment above): the Chunk
// parseOpenAIChunk would return, and true (the shape that served becomes
// sk's skeleton); false (and the zero Chunk) when it has none of them.
func (sk *chunkSkeleton) match(data []byte, completions bool, maxDepth int) (Chunk, bool) {
	if len(data) > maxSkeletonBytes || len(data) == 0 || data[0] != '{' {
		return Chunk{}, false // every skeleton is an object ([DONE] is not)
	}
	if sk.shape != nil {
		if c, ok := sk.matchShape(sk.shape, data, completions, maxDepth); ok {
			return c, true
		}
	}
	if sk.shared == nil {
		return Chunk{}, false
	}
	for range chunkShapesSlots {
		i := sk.slot % chunkShapesSlots
		sk.slot++
		sh := sk.shared.slot[i].Load()
		if sh == nil || sh == sk.shape {
			continue
		}
		if c, ok := sk.matchShape(sh, data, completions, maxDepth); ok {
			sk.rebase(sh, data)
			return c, true
		}
	}
	return Chunk{}, false
}

// rebase makes sk.own the shape sh rebased on data, the chunk that just
// matched it (its tokens in sk.cur), and sk's skeleton. data passed the
// full read sh's chunk passed, its walk making the same choices, so it
// serves as sh does: a chunk matches it exactly when it matches sh.
func (sk *chunkSkeleton) rebase(sh *chunkShape, data []byte) {
	own := &sk.own
	prev := own.prev[:0]
	if prev == nil {
		// Room for the shapes of a typical stream (OpenAI's chunks are
		// 150-400 bytes) at once.
		prev = make([]byte, 0, max(len(data), 512))
	}
	prev = append(prev, data...)
	*own = *sh
	own.prev, own.toks = prev, sk.cur
	if sh.hasUsage {
		own.usage = tokSpan{uint16(sk.shift(sh, int(sh.usage.start))), uint16(sk.shift(sh, int(sh.usage.end)))}
	}
	sk.shape = own
}

// shift is where the byte at offset x of sh.prev, outside its tokens, lies
// in the chunk that just matched sh (its tokens in sk.cur).
func (sk *chunkSkeleton) shift(sh *chunkShape, x int) int {
	k, _ := slices.BinarySearchFunc(sh.toks[:sh.ntoks], x, func(s tokSpan, x int) int { return int(s.start) - x })
	if k == 0 {
		return x // before the first token
	}
	return x + int(sk.cur[k-1].end) - int(sh.toks[k-1].end)
}

// matchShape reads data (space trimmed, at most maxSkeletonBytes) against
// sh, noting its tokens in sk.cur.
func (sk *chunkSkeleton) matchShape(sh *chunkShape, data []byte, completions bool, maxDepth int) (Chunk, bool) {
	if completions != sh.completions || maxDepth != sh.maxDepth {
		return Chunk{}, false
	}
	prev := sh.prev
	k0, p, q := 0, 0, 0 // the next token, and bytes to compare in prev and data
	if lead := sh.lead; lead > 0 {
		// The tokens before the first text string are mostly the stream's
		// own (ids, model, created…): when they are prev's, byte for byte,
		// one comparison passes them (a number last among them is checked
		// by the byte after it, compared next).
		if end := int(sh.toks[lead-1].end); len(data) >= end && bytes.Equal(data[:end], prev[:end]) {
			copy(sk.cur[:lead], sh.toks[:lead])
			k0, p, q = lead, end, end
		}
	}
	for k := k0; k < sh.ntoks; k++ {
		s := sh.toks[k]
		start, stop := int(s.start), int(s.end)
		if whole := prev[p:stop]; len(data)-q >= len(whole) && bytes.Equal(data[q:q+len(whole)], whole) {
			// The token is prev's, byte for byte: a string's end is found
			// by its bytes alone; a number's by the byte after it, which
			// is compared next (prev's, never part of a number).
			sk.cur[k] = tokSpan{uint16(q + start - p), uint16(q + len(whole))}
			p, q = stop, q+len(whole)
			continue
		}
		if sh.isNum&(1<<k) != 0 {
			seg := prev[p:start]
			if len(data)-q < len(seg) || !bytes.Equal(data[q:q+len(seg)], seg) {
				return Chunk{}, false
			}
			q += len(seg)
			end, r := jsonscan.CheckNumber(data, q)
			if r != jsonscan.OK {
				return Chunk{}, false
			}
			sk.cur[k] = tokSpan{uint16(q), uint16(end)}
			p, q = stop, end
			continue
		}
		seg := prev[p : start+1] // up to and with the opening quote
		if len(data)-q < len(seg) || !bytes.Equal(data[q:q+len(seg)], seg) {
			return Chunk{}, false
		}
		q += len(seg)
		end, _, r := jsonscan.CheckString(data, q-1, jsonscan.Options{})
		if r != jsonscan.OK {
			return Chunk{}, false
		}
		if sh.isText&(1<<k) == 0 && (end-(q-1) == 2) != (stop-start == 2) {
			return Chunk{}, false // a string that may hold output changed emptiness
		}
		sk.cur[k] = tokSpan{uint16(q - 1), uint16(end)}
		p, q = stop, end
	}
	if !bytes.Equal(data[q:], prev[p:]) {
		return Chunk{}, false
	}
	var text textJoiner
	body := bodyString(data)
	for _, k := range sh.text[:sh.ntext] {
		s := sk.cur[k]
		text.addString(unescapeJSON(body[s.start+1 : s.end-1]))
	}
	c := Chunk{Text: text.String(), Uncounted: sh.uncounted, UsageOnly: sh.usageOnly, ServiceTier: sh.tier}
	if sh.nfin > 0 {
		var endsBuf [8]byte
		ends := endsBuf[:0]
		for _, k := range sh.fin[:sh.nfin] {
			i, ok := 0, true // no index: choice 0
			if k >= 0 {
				s := sk.cur[k]
				i, ok = choiceIndex(rawValue(body[s.start:s.end]))
			}
			if ok {
				ends = appendChoiceEnd(ends, i)
			}
		}
		c.Finished = choiceEndsOf(ends)
	}
	if sh.hasUsage {
		// The walk reads the usage object's figures (usageOf): read the
		// new chunk's the same way.
		c.Usage, c.HasUsage = usageOf(rawValue(body[sk.shift(sh, int(sh.usage.start)):sk.shift(sh, int(sh.usage.end))]))
	}
	return c, true
}

// offsetIn is the offset in b of the string s when s lies in b (a value
// parsed from b that points into it), else -1: how the skeletons find
// where the full read's strings stand.
func offsetIn(b []byte, s string) int {
	if len(b) == 0 || len(s) == 0 {
		return -1
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	if off < 0 || off+len(s) > len(b) {
		return -1
	}
	return off
}

// isJSONSpace reports whether c is JSON whitespace (RFC 8259 §2).
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
