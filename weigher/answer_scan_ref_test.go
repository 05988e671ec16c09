package weigher

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"testing"
	"unsafe"

	"github.com/llmguard/llmguard/internal/jsonscan"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// scanRef is answerScan.scan as it was before the speed-ups of issue
// #13's perfu round, kept as the oracle of the differential tests
// (TestAnswerScanSameAsRef, FuzzAnswerScanSameAsRef). It reads body,
// nested at most maxDepth levels (0: DefaultMaxDepth; negative: no
// limit), and reports whether it decided: true when body
// passes jsonscan.Check with DuplicateKeys and that limit, s's slots then
// holding where the values asked for lie; false when it cannot say
// (body invalid, too deep, naming a key twice, or outside the subset it
// reads), s's slots then meaningless. Time O(len(body)) (O(answerKeys)
// per key), no allocation; it never keeps body.
func (s *answerScan) scanRef(body []byte, maxDepth int) bool {
	limit := maxDepth
	if limit == 0 {
		limit = DefaultMaxDepth
	}
	if limit < 0 || limit > answerDepth {
		limit = answerDepth
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
	i = skipSpaceBytes(body, i)
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
	i = skipSpaceBytes(body, i)
	if depth == 0 {
		return i == n
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
	i = skipSpaceBytes(body, i)
	if i >= n || body[i] != '"' {
		return false
	}
	{
		// The key's end, a word at a time (no call: keys are short), and
		// its print from its first word (keyPrint).
		start, end := i, -1
		var first uint64
		for j := i + 1; j+8 <= n; j += 8 {
			w := binary.LittleEndian.Uint64(body[j:])
			if j == i+1 {
				first = w
			}
			if m := stringStops(w); m != 0 {
				end = j + 1 + bits.TrailingZeros64(m)/8
				break
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
		if depth < answerCtxKeep && ctx[depth] != ctxNone {
			slot := slotNone
			slot, next = s.noteRef(ctx[depth], k)
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

// noteRef is note as scanRef calls it: what the scan does with the key k of an object of context c:
// the slot its value goes to (slotNone: none) and the context its value
// gets when it is an object.
func (s *answerScan) noteRef(c uint8, k string) (slot int, next uint8) {
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

// answerScanAsks are the members the differential tests ask the scans
// for: chat's usage (with its figures), Responses' output and usage, and
// members asked for that lie elsewhere or nowhere.
var answerScanAsks = []struct {
	a, b string
	chat bool
}{{"usage", "", true}, {"output", "usage", false}, {"usage", "", false}, {"choices", "id", true}, {"x", "", true}, {"", "", false}}

// sameAsRef fails t unless answerScan.scan and scanRef decide body alike
// under the nesting limits depths, for every ask of answerScanAsks, and
// note the same places when they decide. It reports whether scan decided
// at the first limit for the first ask.
func sameAsRef(t *testing.T, body []byte, depths []int) (decided bool) {
	t.Helper()
	for _, depth := range depths {
		for k, q := range answerScanAsks {
			s, r := newAnswerScan(q.a, q.b, q.chat), newAnswerScan(q.a, q.b, q.chat)
			got, want := s.scan(body, depth), r.scanRef(body, depth)
			if got != want {
				t.Fatalf("%q (depth %d, ask %+v): scan decided %v, scanRef %v", body, depth, q, got, want)
			}
			if got && (s.at != r.at || s.end != r.end) {
				t.Fatalf("%q (depth %d, ask %+v): scan noted %v %v, scanRef %v %v", body, depth, q, s.at, s.end, r.at, r.end)
			}
			if k == 0 && depth == depths[0] {
				decided = got
			}
		}
	}
	return decided
}

// hostileAnswers are answers built to catch a scan that skips what it
// must read: keys named twice at each place (in the usage object, its
// details, the root, deep inside choices), escapes in keys and values
// (an escaped key equal to another, an escaped quote before a key-like
// text), keys of every length around the word size, numbers in every
// form, whitespace everywhere, and the mock's answer with each.
func hostileAnswers() []string {
	var out []string
	keys := []string{"", "a", "usage", "prompt_t", "prompt_to", "prompt_tokens", "completion_tokens", "total_tokens", "citation_tokens", "num_search_queries", "cache_creation_input_tokens", "prompt_tokens_details",
		"completion_tokens_details", "cached_tokens", "audio_tokens", "reasoning_tokens", "search_context_size", "cache_creation_tokens", "cache_write_tokens",
		"cache_creation_token_details", "ephemeral_1h_input_tokens", "cost", "is_byok", "cost_details", "upstream_inference_cost", "abcdefgh", "abcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq"}
	nums := []string{"0", "7", "-0", "-7", "07", "1.5", "1e3", "1E+3", "1e-3", "0.0", "123456789012345", "1234567890123456", "1.", ".5", "1e", "-", "+1", `"7"`, `"x"`, "null", "true", "[]", "{}", `{"a":1}`}
	for _, k := range keys {
		for _, v := range nums[:8] {
			out = append(out,
				`{"usage":{"prompt_tokens":5,"completion_tokens":6,"`+k+`":`+v+`,"`+k+`":`+v+`}}`,
				`{"`+k+`":`+v+`,"usage":{"prompt_tokens":5,"completion_tokens":6},"`+k+`":1}`,
				`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"`+k+`":`+v+`,"cached_tokens":2}}}`,
				`{"choices":[{"message":{"`+k+`":`+v+`,"x":{"`+k+`":1,"`+k+`":2}}}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
			)
		}
	}
	for _, v := range nums {
		out = append(out,
			`{"usage":{"prompt_tokens":`+v+`,"completion_tokens":`+v+`}}`,
			`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":`+v+`,"audio_tokens":`+v+`},"completion_tokens_details":{"reasoning_tokens":`+v+`,"audio_tokens":`+v+`}}}`,
			`{"usage":{"prompt_tokens":5,"completion_tokens":6,"search_context_size":`+v+`,"prompt_tokens_details":{"cache_creation_tokens":`+v+`,"cache_write_tokens":`+v+`,"cache_creation_token_details":{"ephemeral_5m_input_tokens":`+v+`,"ephemeral_1h_input_tokens":`+v+`}}}}`,
			`{"usage":{"prompt_tokens":5,"completion_tokens":6},"n":[`+v+`,`+v+`]}`,
		)
	}
	out = append(out,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"usage":{"prompt_tokens":50,"completion_tokens":60}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6},"\u0075sage":{"prompt_tokens":50,"completion_tokens":60}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"\u0070rompt_tokens":50}}`,
		`{"a":"x\"","usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		`{"a":"\\","usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		`{"a":"\\\"usage\":{","usage":{"prompt_tokens":5,"completion_tokens":6}}`,
		"{\"usage\"\t:\r\n{\"prompt_tokens\" :5 , \"completion_tokens\":\n6 }\t,\"z\" : [ 1 , { } , [ ] ] }",
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"cached_tokens":9}}}`,
		`{"usage":{"prompt_tokens":5,"completion_tokens":6,"completion_tokens_details":{"reasoning_tokens":1,"reasoning_tokens":2}}}`,
		`{"usage":[{"prompt_tokens":5,"completion_tokens":6}]}`,
		`{"usage":{"usage":{"prompt_tokens":5,"completion_tokens":6}},"prompt_tokens":1}`,
	)
	for _, k := range keys[1:] {
		out = append(out, strings.Replace(mockChatAnswer, `"system_fingerprint"`, `"`+k+`":1,"`+k+`"`, 1))
	}
	return out
}

// TestAnswerScanSameAsRef: the scan decides as its former self (scanRef)
// and notes the same places, on every answer case and hostile answer,
// each cut short at every byte and with each byte replaced by a few
// others; and it decides the ordinary answers, so the comparison is not
// only of two refusals.
func TestAnswerScanSameAsRef(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	decided, all := 0, append(answerCases(), hostileAnswers()...)
	for _, c := range all {
		if sameAsRef(t, []byte(c), answerDepths) {
			decided++
		}
		for n := range len(c) {
			sameAsRef(t, []byte(c[:n]), []int{0, 3})
			for _, r := range []byte{'"', '\\', '}', ']', ',', ':', ' ', '0', 'e', 0x01} {
				b := []byte(c)
				b[n] = r
				sameAsRef(t, b, []int{0})
			}
		}
	}
	if decided < 150 {
		t.Fatalf("the scan decided %d of %d answers", decided, len(all))
	}
}

// FuzzAnswerScanSameAsRef is TestAnswerScanSameAsRef on any input.
func FuzzAnswerScanSameAsRef(f *testing.F) {
	for _, c := range append(answerCases(), hostileAnswers()...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameAsRef(t, body, answerDepths) })
}
