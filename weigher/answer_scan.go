package weigher

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// answerScan reads an upstream JSON answer in one forward pass: it checks
// the answer and, on the way, notes where the top-level members it is
// asked for lie and, for a chat answer, where the figures of its usage
// object lie, so that nothing is scanned twice (issue #13: the check,
// then a walk of the members, then one of the usage, cost 21.6k
// instructions for the 594-byte mock answer).
//
// It reads only the answers every API sends: it accepts a subset of what
// jsonscan.Check accepts with DuplicateKeys (no key holding an escape,
// at most answerKeys keys open at once, nesting at most answerDepth and
// the caller's limit), and says "undecided" for everything else,
// invalid or odd. Its callers then read the answer as before (the check
// and the layout walk: upstreamMembersChecked, parseChatUsageChecked),
// so an odd or hostile answer gets exactly the old reading, at the cost
// of a second pass; the differential tests (answer_scan_test.go) hold
// the two readers to the same answers.
//
// Strings and numbers are checked by jsonscan's own rules
// (jsonscan.CheckString for a string holding an escape,
// jsonscan.CheckNumber); keys are compared as written, which is how
// jsonscan compares keys without escapes. Make one with newAnswerScan
// (its slots start at -1); not safe for concurrent use.
type answerScan struct {
	a, b string // the top-level members asked for (b "": none)
	chat bool   // note chat usage figures in member a's object
	// tier: note the top-level member "service_tier" (slotTier), the
	// tier the answer says it was served at; set for a chat scan.
	tier bool
	// lens holds, by object context, the lengths of the keys note may
	// note there, modulo 64 (bit l%64 for length l; none for ctxNone): a
	// key of another length is passed over without a call.
	lens [8]uint64
	// at and end hold where the values noted start and end (-1:
	// absent), by slot.
	at, end [slotCount]int32
}

// Slots of answerScan.at: the values of members a and b, and of the
// top-level "service_tier" (when asked: answerScan.tier), then the chat
// usage figures (prompt_tokens, completion_tokens, total_tokens, and
// Perplexity's citation_tokens, reasoning_tokens, num_search_queries,
// search_context_size, LiteLLM's cache_creation_input_tokens; cached and
// audio tokens of prompt_tokens_details, and the cache writes gateways
// report there: LiteLLM's cache_creation_tokens and the 5-minute and
// 1-hour parts of its cache_creation_token_details, OpenRouter's
// cache_write_tokens; reasoning and audio tokens of
// completion_tokens_details).
const (
	slotA = iota
	slotB
	slotTier
	slotPrompt
	slotCompletion
	slotTotal
	slotCitations
	slotReasoningTop
	slotSearches
	slotCacheWrite
	slotSearchContext
	slotCached
	slotAudioIn
	slotCreation
	slotWriteDet
	slotCreation5m
	slotCreation1h
	slotReasoning
	slotAudioOut
	slotCost
	slotByok
	slotUpstreamCost
	slotCount
)

// slotNone is no slot: a value the scan does not note.
const slotNone = -1

// Contexts of the objects answerScan follows: what an object holds that
// the scan notes.
const (
	ctxNone      = iota
	ctxRoot      // the top-level object
	ctxUsage     // member a's object, in a chat answer
	ctxPromptDet // usage.prompt_tokens_details
	ctxOutputDet // usage.completion_tokens_details
	ctxWriteDet  // usage.prompt_tokens_details.cache_creation_token_details
	ctxCostDet   // usage.cost_details (OpenRouter)
)

// The bounds of what answerScan reads; an answer beyond them is left to
// the checked readers.
const (
	answerDepth   = 32 // the most nesting (arrays and objects open at once)
	answerKeys    = 32 // the most keys of the open objects, together
	answerCtxKeep = 5  // depths whose object context is kept: 1 to 4
)

// newAnswerScan is a scan for the top-level members a and b (b "": none),
// noting the chat usage figures of a's object and the answer's
// service_tier when chat.
func newAnswerScan(a, b string, chat bool) answerScan {
	s := answerScan{a: a, b: b, chat: chat, tier: chat}
	root := uint64(1<<(len(a)&63) | 1<<(len(b)&63))
	if chat {
		root |= 1 << len("service_tier")
	}
	s.lens = [8]uint64{
		ctxRoot:      root,
		ctxUsage:     1<<len("prompt_tokens") | 1<<len("completion_tokens") | 1<<len("total_tokens") | 1<<len("citation_tokens") | 1<<len("reasoning_tokens") | 1<<len("num_search_queries") | 1<<len("cache_creation_input_tokens") | 1<<len("search_context_size") | 1<<len("prompt_tokens_details") | 1<<len("completion_tokens_details") | 1<<len("cost") | 1<<len("is_byok") | 1<<len("cost_details"),
		ctxCostDet:   1 << (len("upstream_inference_cost") & 63),
		ctxPromptDet: 1<<len("cached_tokens") | 1<<len("audio_tokens") | 1<<len("cache_creation_tokens") | 1<<len("cache_write_tokens") | 1<<len("cache_creation_token_details"),
		ctxOutputDet: 1<<len("reasoning_tokens") | 1<<len("audio_tokens"),
		ctxWriteDet:  1<<len("ephemeral_5m_input_tokens") | 1<<len("ephemeral_1h_input_tokens"),
	}
	for i := range s.at {
		s.at[i] = -1
	}
	return s
}

// askTier makes s note the answer's top-level "service_tier" too
// (slotTier).
func (s *answerScan) askTier() {
	s.tier = true
	s.lens[ctxRoot] |= 1 << len("service_tier")
}

// scan reads body, nested at most maxDepth levels (0: DefaultMaxDepth;
// negative: no limit), and reports whether it decided: true when body
// passes jsonscan.Check with DuplicateKeys and that limit, s's slots then
// holding where the values asked for lie; false when it cannot say
// (body invalid, too deep, naming a key twice, or outside the subset it
// reads), s's slots then meaningless. A chat scan reads a body that has
// the shape of the last chat answer decided by that shape (fromShape, the
// same verdict and places), and keeps a chat answer it decides otherwise
// as the shape (keepShape: a copy of body, at most every shapeRenew-th
// miss). Time O(len(body)) (O(answerKeys) per key); no allocation but a
// new shape's.
func (s *answerScan) scan(body []byte, maxDepth int) bool {
	limit := maxDepth
	if limit == 0 {
		limit = DefaultMaxDepth
	}
	if limit < 0 || limit > answerDepth {
		limit = answerDepth
	}
	if s.chat && s.fromShape(body, limit) {
		return true
	}
	n := len(body)
	if n >= 1<<31-1 {
		return false
	}
	var (
		kinds  uint64                  // one bit per open container, the innermost lowest: 1 for an object
		prints [answerKeys]uint64      // the keys of the open objects: keyPrint
		starts [answerKeys]int32       // and where they start (their opening quote)
		base   [answerDepth + 1]uint8  // where the keys of the object at depth d start
		blooms [answerDepth + 1]uint64 // the bloom of the object that holds the one at depth d
		bloom  uint64                  // a bit per key of the innermost object (keyBit)
		ctx    [answerCtxKeep]uint8    // the context of the object at depth d
		nk     int                     // keys held
		depth  int                     // containers open
		next   uint8                   = ctxRoot
		// member and figure are the slots of the top-level member and of
		// the usage figure being read (slotNone: none); watch is the
		// depth at which the innermost of them ends (-1: none open).
		member, figure = slotNone, slotNone
		watch          = -1
		i              int
	)

value: // a value is expected at i, after optional whitespace
	if i < n && body[i] <= ' ' {
		i = skipSpaceBytes(body, i)
	}
	if i >= n {
		return false
	}
	switch c := body[i]; c {
	case '{':
		depth++
		if depth > limit {
			return false
		}
		kinds = kinds<<1 | 1
		base[depth] = uint8(nk)
		blooms[depth], bloom = bloom, 0
		if depth < answerCtxKeep {
			ctx[depth] = next
		}
		i = skipSpaceBytes(body, i+1)
		if i < n && body[i] == '}' {
			i++
			depth--
			kinds >>= 1
			bloom = blooms[depth+1]
			goto after
		}
		goto key
	case '[':
		depth++
		if depth > limit {
			return false
		}
		kinds <<= 1
		next = ctxNone
		i = skipSpaceBytes(body, i+1)
		if i < n && body[i] == ']' {
			i++
			depth--
			kinds >>= 1
			goto after
		}
		goto value
	case '"':
		end := -1
		for j := i + 1; j+8 <= n; j += 8 { // as for a key
			if m := stringStops(binary.LittleEndian.Uint64(body[j:])); m != 0 {
				end = j + 1 + bits.TrailingZeros64(m)/8
				break
			}
		}
		if end < 0 {
			end = plainString(body, i)
		}
		if end < 0 || body[end-1] != '"' {
			// An escape (or the end of the input, or a control
			// character): jsonscan's own rules decide.
			e, _, r := jsonscan.CheckString(body, i, jsonscan.Options{})
			if r != jsonscan.OK {
				return false
			}
			end = e
		}
		i = end
	case 't':
		if !literal(body, i, "true") {
			return false
		}
		i += 4
	case 'f':
		if !literal(body, i, "false") {
			return false
		}
		i += 5
	case 'n':
		if !literal(body, i, "null") {
			return false
		}
		i += 4
	default:
		// A count (digits, no leading zero) is read here; any other
		// number by jsonscan's rules.
		j := i
		for j < n && body[j]-'0' <= 9 {
			j++
		}
		if j == i || j-i > 1 && c == '0' || j < n && (body[j] == '.' || body[j]|0x20 == 'e') {
			end, r := jsonscan.CheckNumber(body, i)
			if r != jsonscan.OK {
				return false
			}
			j = end
		}
		i = j
	}

after: // a value ended just before i
	// A value noted ends here when the scan is back at its key's depth
	// (a figure's value holds nothing noted: at most one is open, inside
	// the member).
	if depth == watch {
		if figure != slotNone {
			s.end[figure] = int32(i)
			figure, watch = slotNone, -1
			if member != slotNone {
				watch = 1
			}
		} else {
			s.end[member] = int32(i)
			member, watch = slotNone, -1
		}
	}
	if i < n && body[i] <= ' ' {
		i = skipSpaceBytes(body, i)
	}
	if depth == 0 {
		if i != n {
			return false
		}
		if s.chat {
			s.keepShape(body)
		}
		return true
	}
	if i >= n {
		return false
	}
	if kinds&1 != 0 {
		switch body[i] {
		case ',':
			i++
			goto key
		case '}':
			nk = int(base[depth])
			bloom = blooms[depth]
			i++
			depth--
			kinds >>= 1
			goto after
		}
		return false
	}
	switch body[i] {
	case ',':
		i++
		next = ctxNone
		goto value
	case ']':
		i++
		depth--
		kinds >>= 1
		goto after
	}
	return false

key: // a key is expected at i, after optional whitespace
	if i < n && body[i] <= ' ' {
		i = skipSpaceBytes(body, i)
	}
	if i >= n || body[i] != '"' {
		return false
	}
	{
		// The key's end, a word at a time (no call: keys are short), and
		// its print from its first word (keyPrint).
		start, end := i, -1
		var first uint64
		if j := i + 1; j+8 <= n {
			first = binary.LittleEndian.Uint64(body[j:])
			for m := stringStops(first); ; {
				if m != 0 {
					end = j + 1 + bits.TrailingZeros64(m)/8
					break
				}
				if j += 8; j+8 > n {
					break
				}
				m = stringStops(binary.LittleEndian.Uint64(body[j:]))
			}
		}
		if end < 0 { // the last few bytes of the input
			end = plainString(body, i)
		}
		if end < 0 || body[end-1] != '"' {
			return false // an escaped key, or a bad one: not read here
		}
		k := unsafe.String(&body[start+1], end-start-2)
		var p uint64
		switch l := len(k); {
		case start+9 > n:
			p = keyPrint(body[start+1 : end-1])
		case l >= 8:
			p = first ^ uint64(l)*printMix
		default:
			p = first&(1<<(8*l)-1) ^ uint64(l)*printMix
		}
		if bit := keyBit(p); bloom&bit == 0 {
			bloom |= bit // a new key: no earlier one has its bit
		} else {
			for j := int(base[depth]); j < nk; j++ {
				// Equal keys have equal prints; the texts are compared
				// over k's length, which a key of another length whose
				// print is the same could match as a prefix: then the
				// answer is left undecided, never taken as valid.
				if prints[j] == p && bodyString(body[starts[j]+1:int(starts[j])+len(k)+1]) == k {
					return false // a key named twice: jsonscan refuses it
				}
			}
		}
		if nk == answerKeys {
			return false
		}
		prints[nk], starts[nk] = p, int32(start)
		nk++
		if i = end; i >= n || body[i] != ':' {
			if i = skipSpaceBytes(body, i); i >= n || body[i] != ':' {
				return false
			}
		}
		i++ // value skips the whitespace after the colon
		next = ctxNone
		if depth < answerCtxKeep && s.lens[ctx[depth]&7]>>(len(k)&63)&1 != 0 {
			slot := slotNone
			slot, next = s.note(ctx[depth], k)
			if slot != slotNone {
				i = skipSpaceBytes(body, i) // where the value starts
				s.at[slot] = int32(i)
				if depth == 1 {
					member = slot
				} else {
					figure = slot
				}
				watch = depth
			}
		}
	}
	goto value
}

// note is what the scan does with the key k of an object of context c:
// the slot its value goes to (slotNone: none) and the context its value
// gets when it is an object.
func (s *answerScan) note(c uint8, k string) (slot int, next uint8) {
	switch c {
	case ctxRoot:
		switch {
		case k == s.a:
			if s.chat {
				return slotA, ctxUsage
			}
			return slotA, ctxNone
		case s.b != "" && k == s.b:
			return slotB, ctxNone
		case s.tier && k == "service_tier":
			return slotTier, ctxNone
		}
	case ctxUsage:
		switch k {
		case "prompt_tokens":
			return slotPrompt, ctxNone
		case "completion_tokens":
			return slotCompletion, ctxNone
		case "total_tokens":
			return slotTotal, ctxNone
		case "citation_tokens":
			return slotCitations, ctxNone
		case "reasoning_tokens":
			return slotReasoningTop, ctxNone
		case "num_search_queries":
			return slotSearches, ctxNone
		case "cache_creation_input_tokens":
			return slotCacheWrite, ctxNone
		case "search_context_size":
			return slotSearchContext, ctxNone
		case "prompt_tokens_details":
			return slotNone, ctxPromptDet
		case "completion_tokens_details":
			return slotNone, ctxOutputDet
		case "cost":
			return slotCost, ctxNone
		case "is_byok":
			return slotByok, ctxNone
		case "cost_details":
			return slotNone, ctxCostDet
		}
	case ctxCostDet:
		if k == "upstream_inference_cost" {
			return slotUpstreamCost, ctxNone
		}
	case ctxPromptDet:
		switch k {
		case "cached_tokens":
			return slotCached, ctxNone
		case "audio_tokens":
			return slotAudioIn, ctxNone
		case "cache_creation_tokens":
			return slotCreation, ctxNone
		case "cache_write_tokens":
			return slotWriteDet, ctxNone
		case "cache_creation_token_details":
			return slotNone, ctxWriteDet
		}
	case ctxWriteDet:
		switch k {
		case "ephemeral_5m_input_tokens":
			return slotCreation5m, ctxNone
		case "ephemeral_1h_input_tokens":
			return slotCreation1h, ctxNone
		}
	case ctxOutputDet:
		switch k {
		case "reasoning_tokens":
			return slotReasoning, ctxNone
		case "audio_tokens":
			return slotAudioOut, ctxNone
		}
	}
	return slotNone, ctxNone
}

// member is the value of member a (slot slotA) or b (slotB) of the
// answer body s decided, as upstreamMembersChecked gives it (gjson's
// parse of the value's text; the zero Result when absent).
func (s *answerScan) member(body []byte, slot int) gjson.Result {
	if s.at[slot] < 0 {
		return gjson.Result{}
	}
	return gjson.Parse(bodyString(body[s.at[slot]:s.end[slot]]))
}

// raw is the value noted in slot of the answer body s decided, as
// rawValue gives it (the zero Result when absent).
func (s *answerScan) raw(body []byte, slot int) gjson.Result {
	if s.at[slot] < 0 {
		return gjson.Result{}
	}
	return rawValue(bodyString(body[s.at[slot]:s.end[slot]]))
}

// servedTier is the service tier the answer body s decided names in its
// top-level service_tier (servedTier; "" when it names none).
func (s *answerScan) servedTier(body []byte) string {
	if s.at[slotTier] < 0 {
		return ""
	}
	return servedTier(bodyString(body[s.at[slotTier]:s.end[slotTier]]))
}

// count is rawCount of the value noted in slot (a chat usage figure) of
// the answer body s decided, as rawValue gives it (the zero Result when
// absent); a count of at most 15 digits, as rawCount reads it without a
// parse, is read here without making the Result.
func (s *answerScan) count(body []byte, slot int) (int64, bool) {
	if s.at[slot] < 0 {
		return rawCount(gjson.Result{})
	}
	v := body[s.at[slot]:s.end[slot]]
	if len(v) <= 15 {
		n := int64(0)
		for _, c := range v {
			if c-'0' > 9 {
				return rawCount(rawValue(bodyString(v)))
			}
			n = n*10 + int64(c-'0')
		}
		return n, n > 0
	}
	return rawCount(rawValue(bodyString(v)))
}

// chatUsage is usageOf of member a, the usage object of the chat answer
// body s decided, read from the figures the scan noted, with the service
// tier the answer names (servedTier): the same answer as
// parseChatUsageChecked's, as the answer names no key twice.
func (s *answerScan) chatUsage(body []byte) (u Usage, ok bool) {
	if at := s.at[slotA]; at < 0 || body[at] != '{' {
		return Usage{}, false
	}
	in, okIn := s.count(body, slotPrompt)
	out, okOut := s.count(body, slotCompletion)
	if !okOut && s.at[slotCompletion] >= 0 {
		out, okOut = outputCount(rawValue(bodyString(body[s.at[slotCompletion]:s.end[slotCompletion]])))
	}
	if !okIn || !okOut {
		return Usage{}, false
	}
	u.InputTokens, u.OutputTokens = in, out
	u.CachedInputTokens, _ = s.count(body, slotCached)
	u.AudioInputTokens, _ = s.count(body, slotAudioIn)
	u.ReasoningTokens, _ = s.count(body, slotReasoning)
	u.AudioOutputTokens, _ = s.count(body, slotAudioOut)
	var a apart
	a.total, _ = s.count(body, slotTotal)
	a.citations, _ = s.count(body, slotCitations)
	a.reasoning, _ = s.count(body, slotReasoningTop)
	a.searches, _ = s.count(body, slotSearches)
	a.cacheWrite, _ = s.count(body, slotCacheWrite)
	var pd promptDetails
	pd.creation, _ = s.count(body, slotCreation)
	pd.write, _ = s.count(body, slotWriteDet)
	pd.creation5m, _ = s.count(body, slotCreation5m)
	pd.creation1h, _ = s.count(body, slotCreation1h)
	a.detailWrites(pd)
	if at := s.at[slotSearchContext]; at >= 0 {
		a.searchContext = searchContextOf(rawValue(bodyString(body[at:s.end[slotSearchContext]])))
	}
	u = withLeftOut(u, a)
	u.BilledMicroUSD = billedMicroUSD(s.raw(body, slotCost), s.raw(body, slotUpstreamCost), s.raw(body, slotByok))
	u.ServiceTier = s.servedTier(body)
	return u, true
}

// skipSpaceBytes is skipSpace (scan.go) on a byte slice, which it reads
// without a copy.
func skipSpaceBytes(b []byte, i int) int {
	return skipSpace(unsafe.String(unsafe.SliceData(b), len(b)), i)
}

// literal reports whether word (true, false, null) is written at b[i:].
func literal(b []byte, i int, word string) bool {
	return len(b)-i >= len(word) && string(b[i:i+len(word)]) == word
}

// plainString returns the offset just past the first byte after b[i] (a
// string's opening quote) that is a quote, a backslash or a control
// character, or -1 when there is none: for a string without escapes or
// control characters, the offset past its closing quote (b[end-1] is
// '"'). Eight bytes at a time (stringStops), the last few one by one.
func plainString(b []byte, i int) int {
	for i++; i+8 <= len(b); i += 8 {
		if m := stringStops(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8 + 1
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i + 1
		}
	}
	return -1
}

// stringStops flags (0x80) the bytes of w, eight bytes of a string, the
// first in the low byte, that are a quote, a backslash or below 0x20, by
// the "has a byte below n" trick on 64-bit words, (x - n·ones) &^ x: it
// may flag a byte above one it rightly flags (a borrow), never one below,
// and none when no byte qualifies; so the lowest byte flagged is the
// first that qualifies. Flipping bit 1 of each byte takes the quote
// (0x22) to 0x20 and keeps the control characters below 0x20 (pairs of
// them swap), while every other byte lands at 0x21 or above: one test
// (below 0x21) finds both. The backslash takes its own test (equal to
// '\\': below 1 after xor).
func stringStops(w uint64) uint64 {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	flip := w ^ (ones * 0x02)
	slash := w ^ (ones * '\\')
	return ((flip-ones*0x21)&^flip | (slash-ones)&^slash) & msb
}

// keyBit is the bit of an object's bloom (a word) that stands for the
// key whose print is p: the top six bits of p scrambled by a
// multiplication, as p's own top bits vary little (a short key's are
// zero).
func keyBit(p uint64) uint64 { return 1 << ((p * printMix) >> 58) }

// keyPrint is a fingerprint of the key k (its text between the quotes):
// its length mixed with its first eight bytes (all of it when shorter).
// Keys equal as written have equal prints.
func keyPrint(k []byte) uint64 {
	var w uint64
	if len(k) >= 8 {
		w = binary.LittleEndian.Uint64(k)
	} else {
		for j, c := range k {
			w |= uint64(c) << (8 * j)
		}
	}
	return w ^ uint64(len(k))*printMix
}

// printMix spreads a key's length over its print (the golden ratio's
// 64-bit constant).
const printMix = 0x9e3779b97f4a7c15
