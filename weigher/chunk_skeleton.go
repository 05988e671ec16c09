package weigher

import (
	"bytes"
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
// A chunkSkeleton is that last chunk: its bytes and where its value
// strings lie. A new chunk takes the fast path (match) only when its bytes
// equal the skeleton's everywhere outside the contents of value strings
// (keys included: they are compared as bytes), and each string that stands
// in its place passes jsonscan.CheckString (the rules Check applies to
// every string). Such a chunk passes the same Check the skeleton passed —
// the same tokens in the same order, with the same nesting and keys, only
// string values (valid ones) swapped — and the walk over it makes the
// same choices (which it makes on keys and value types, never on string
// contents, but for the emptiness of a string a delta member the walk does
// not know holds: mayHoldOutput). So its Chunk is the skeleton's with Text
// made from the text-bearing strings (those the full walk added to Text,
// recorded by it in the order it added them), provided no other string
// changed emptiness. Any doubt, and the full parse reads the chunk:
// a skeleton is kept only from a chunk read in full that carried no usage
// (no string inside a "usage" member), no error, and was not [DONE] nor
// unread; a chunk that does not match is read in full and becomes the
// skeleton when it may serve as one. Any chunk that passed in full may serve: a
// match is exact whichever earlier chunk the skeleton holds.
//
// Memory: at most maxSkeletonBytes of chunk plus fixed arrays for
// maxSkeletonStrings strings, some 5 KiB per stream, held while the stream
// is read. Time: a match compares at most len(skeleton)+len(chunk) bytes
// once (a mismatch stops at the first differing byte); building a
// skeleton is one pass over the chunk. Neither is more than linear in the
// chunk, which is at most maxSkeletonBytes, whatever an upstream sends.

// maxSkeletonBytes is the largest chunk (after trimming space) that may be
// a skeleton or be matched against one: OpenAI's chunks are 150-400 bytes.
const maxSkeletonBytes = 4 << 10

// maxSkeletonStrings is the most value strings a skeleton may hold: a
// plain content chunk holds 4-8 (id, object, model, fingerprint, content,
// obfuscation…), a parallel tool-call chunk a few more per call.
const maxSkeletonStrings = 64

// chunkSkeleton is the last chat or completions chunk read in full that
// may serve to read later ones (see the comment above). The zero value
// holds no skeleton. Not safe for concurrent use.
type chunkSkeleton struct {
	// prev is the chunk, space trimmed (≤ maxSkeletonBytes); ok says it is
	// a skeleton (false: none).
	prev []byte
	ok   bool
	// completions and maxDepth are how prev was read (parseOpenAIChunk's
	// arguments); a chunk read otherwise does not match.
	completions bool
	maxDepth    int
	// strs are prev's value strings (not keys), quotes included, in
	// document order: strs[:nstrs].
	strs  [maxSkeletonStrings]jsonscan.Span
	nstrs int
	// text are the indices in strs of the strings the walk added to Text,
	// in the order it added them: text[:ntext]; isText has bit k set for
	// each of them.
	text   [maxSkeletonStrings]uint8
	ntext  int
	isText uint64
	// uncounted is prev's Chunk.Uncounted.
	uncounted bool
	// data is the chunk being read in full, and at[:nat] the offsets in it
	// of the string values the walk added to Text (noteText), more than
	// maxSkeletonStrings setting over: the recorder parseOpenAIChunk fills.
	data []byte
	at   [maxSkeletonStrings]int32
	nat  int
	over bool
	// cur is where match found the new chunk's strings.
	cur [maxSkeletonStrings]jsonscan.Span
}

// noteText records that the walk added the string value raw, which lies in
// r.data, to Text; nothing when r is nil.
func (r *chunkSkeleton) noteText(raw string) {
	if r == nil || raw == "" {
		return
	}
	off := offsetIn(r.data, raw)
	if off < 0 || r.nat == len(r.at) {
		r.over = true // not in the chunk (never so) or too many: no skeleton
		return
	}
	r.at[r.nat] = int32(off)
	r.nat++
}

// readChunk is parseOpenAIChunk(data, completions, maxDepth) through sk:
// a chunk shaped as sk's skeleton is read by match, any other in full (and
// kept as the skeleton when it may serve as one).
func (sk *chunkSkeleton) readChunk(data []byte, completions bool, maxDepth int) Chunk {
	data = bytes.TrimSpace(data)
	if c, ok := sk.match(data, completions, maxDepth); ok {
		return c
	}
	if len(data) > maxSkeletonBytes || len(data) < 2 || data[0] != '{' {
		return parseOpenAIChunk(data, completions, maxDepth)
	}
	sk.data, sk.nat, sk.over = data, 0, false
	c := parseOpenAIChunkRec(data, completions, maxDepth, sk)
	sk.data = nil
	sk.build(data, c, completions, maxDepth)
	return c
}

// build makes data, a chunk parseOpenAIChunk read as c recording its text
// strings in sk.at, the skeleton, when it may serve as one: c carried no
// usage, error or [DONE] and was read; it has at most maxSkeletonStrings
// value strings, none inside a top-level "usage" or "error" member (nor
// under a top-level key holding an escape), and every string the walk
// added to Text is one of them. Otherwise sk keeps the skeleton it held
// (a chunk an odd one interrupts, such as an unreadable chunk, is still
// read on the fast path after it).
func (sk *chunkSkeleton) build(data []byte, c Chunk, completions bool, maxDepth int) {
	if c.Unread || c.Done || c.Err || c.HasUsage || c.UsageOnly || sk.over {
		return
	}
	strs := &sk.cur // scratch until data is known to serve
	n, depth := 0, 0
	guarded := false // the top-level member being read is "usage" or "error"
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := jsonscan.Skip(data, i)
			if end < 0 {
				return // never: data passed Check
			}
			j := end
			for j < len(data) && isJSONSpace(data[j]) {
				j++
			}
			if j < len(data) && data[j] == ':' { // a key
				if depth == 1 {
					k := data[i+1 : end-1]
					if bytes.IndexByte(k, '\\') >= 0 {
						return
					}
					guarded = string(k) == "usage" || string(k) == "error"
				}
			} else {
				if guarded || n == maxSkeletonStrings {
					return
				}
				strs[n] = jsonscan.Span{Start: int32(i), End: int32(end)}
				n++
			}
			i = end - 1
		}
	}
	var text [maxSkeletonStrings]uint8
	isText := uint64(0)
	for i, off := range sk.at[:sk.nat] {
		k, found := slices.BinarySearchFunc(strs[:n], off, func(s jsonscan.Span, off int32) int { return int(s.Start - off) })
		if !found {
			return
		}
		text[i] = uint8(k)
		isText |= 1 << k
	}
	sk.strs, sk.nstrs, sk.text, sk.ntext, sk.isText = *strs, n, text, sk.nat, isText
	sk.prev = append(sk.prev[:0], data...)
	sk.completions, sk.maxDepth, sk.uncounted, sk.ok = completions, maxDepth, c.Uncounted, true
}

// match reads data (space trimmed) on the fast path when it has sk's
// skeleton's shape (see the comment above): the Chunk parseOpenAIChunk
// would return, and true; false (and the zero Chunk) when it has not, or
// sk holds no skeleton for chunks read so.
func (sk *chunkSkeleton) match(data []byte, completions bool, maxDepth int) (Chunk, bool) {
	if !sk.ok || completions != sk.completions || maxDepth != sk.maxDepth || len(data) > maxSkeletonBytes {
		return Chunk{}, false
	}
	prev := sk.prev
	p, q := 0, 0 // the next bytes to compare in prev and data
	for k, s := range sk.strs[:sk.nstrs] {
		if whole := prev[p:s.End]; len(data)-q >= len(whole) && bytes.Equal(data[q:q+len(whole)], whole) {
			// The string is prev's, byte for byte (the same token: its end
			// is found by its bytes alone).
			sk.cur[k] = jsonscan.Span{Start: int32(q + int(s.Start) - p), End: int32(q + len(whole))}
			p, q = int(s.End), q+len(whole)
			continue
		}
		seg := prev[p : s.Start+1] // up to and with the opening quote
		if len(data)-q < len(seg) || !bytes.Equal(data[q:q+len(seg)], seg) {
			return Chunk{}, false
		}
		q += len(seg)
		end, _, r := jsonscan.CheckString(data, q-1, jsonscan.Options{})
		if r != jsonscan.OK {
			return Chunk{}, false
		}
		if sk.isText&(1<<k) == 0 && (end-(q-1) == 2) != (s.End-s.Start == 2) {
			return Chunk{}, false // a string that may hold output changed emptiness
		}
		sk.cur[k] = jsonscan.Span{Start: int32(q - 1), End: int32(end)}
		p, q = int(s.End), end
	}
	if !bytes.Equal(data[q:], prev[p:]) {
		return Chunk{}, false
	}
	var text textJoiner
	body := bodyString(data)
	for _, k := range sk.text[:sk.ntext] {
		s := sk.cur[k]
		text.addString(unescapeJSON(body[s.Start+1 : s.End-1]))
	}
	return Chunk{Text: text.String(), Uncounted: sk.uncounted}, true
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
