package weigher

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// A Responses stream sends its output as *.delta events that, within an
// output item, differ in the text they carry, in a sequence_number that
// counts the events, and in a random obfuscation string:
//
//	{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"x1"}
//
// A responseSkeleton is the last such event responsesEvent read in full
// (one whose string "type" ends in ".delta" and is not audio, whose
// "delta" is a string), with where its value strings and numbers lie. A
// new event is read on the fast path when its bytes equal the skeleton's
// everywhere outside those tokens (keys included), the "type" string is the
// skeleton's byte for byte, and each other token is a string
// (jsonscan.CheckString) or a number (jsonscan.CheckNumber) where the
// skeleton had one. It is then the skeleton with scalar values swapped for
// valid ones of the same kind: it passes the same check (parseObject:
// syntax, depth, duplicate keys, all unchanged), and responsesEvent takes the
// same branch for it, as that branch reads only "type" (the same) and
// "delta" (the text, decoded by gjson as the full read decodes it).
//
// Memory: at most maxSkeletonBytes of event and fixed arrays for
// maxSkeletonStrings tokens per stream. Time: a match compares at most the
// skeleton's and the event's bytes once.

// responseToken is a value string or number of a responseSkeleton: its
// bytes (a string's quotes included) and whether it is a number.
type responseToken struct {
	jsonscan.Span
	num bool
}

// responseSkeleton is the last Responses *.delta event read in full (see
// above). The zero value holds none. Not safe for concurrent use.
type responseSkeleton struct {
	// prev is the event, space trimmed; ok says it is a skeleton.
	prev []byte
	ok   bool
	// toks[:ntoks] are prev's value strings and numbers in document order;
	// typ and delta index the "type" and "delta" strings among them.
	toks        [maxSkeletonStrings]responseToken
	ntoks       int
	typ, delta  int
	maxDepth    int
	scratchToks [maxSkeletonStrings]responseToken
}

// keep makes data, an event responsesEvent read in full (nested at most
// maxDepth levels) as a *.delta event whose "type" and "delta" members are
// the strings typ and delta (Results whose Raw lies in data), the
// skeleton, when it can be one (at most maxSkeletonBytes, at most
// maxSkeletonStrings tokens); otherwise r keeps the skeleton it held.
func (r *responseSkeleton) keep(data []byte, typ, delta gjson.Result, maxDepth int) {
	data = trimJSONSpace(data)
	if len(data) > maxSkeletonBytes || typ.Type != gjson.String || delta.Type != gjson.String {
		return
	}
	to, do := offsetIn(data, typ.Raw), offsetIn(data, delta.Raw)
	if to < 0 || do < 0 {
		return
	}
	toks := &r.scratchToks
	n, ti, di := 0, -1, -1
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			end := jsonscan.Skip(data, i)
			if end < 0 {
				return // never: data passed Check
			}
			j := end
			for j < len(data) && isJSONSpace(data[j]) {
				j++
			}
			if j >= len(data) || data[j] != ':' { // a value
				if n == len(toks) {
					return
				}
				switch i {
				case to:
					ti = n
				case do:
					di = n
				}
				toks[n] = responseToken{Span: jsonscan.Span{Start: int32(i), End: int32(end)}}
				n++
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			end, res := jsonscan.CheckNumber(data, i)
			if res != jsonscan.OK || n == len(toks) {
				return
			}
			toks[n] = responseToken{Span: jsonscan.Span{Start: int32(i), End: int32(end)}, num: true}
			n++
			i = end
		default:
			i++
		}
	}
	if ti < 0 || di < 0 {
		return
	}
	r.toks, r.ntoks, r.typ, r.delta, r.maxDepth = *toks, n, ti, di, maxDepth
	r.prev = append(r.prev[:0], data...)
	r.ok = true
}

// match reads data (nested at most maxDepth levels) on the fast path when
// it has the skeleton's shape: the text of its "delta", and true; false
// when it has not (or r holds no skeleton for that limit).
func (r *responseSkeleton) match(data []byte, maxDepth int) (string, bool) {
	if !r.ok || maxDepth != r.maxDepth {
		return "", false
	}
	data = trimJSONSpace(data)
	if len(data) > maxSkeletonBytes {
		return "", false
	}
	prev := r.prev
	p, q := 0, 0
	var text jsonscan.Span
	for k, t := range r.toks[:r.ntoks] {
		seg := prev[p:t.Start]
		if k == r.typ {
			seg = prev[p:t.End] // the type is compared whole
		}
		if len(data)-q < len(seg) || !bytes.Equal(data[q:q+len(seg)], seg) {
			return "", false
		}
		q += len(seg)
		p = int(t.End)
		if k == r.typ {
			continue
		}
		var end int
		var res jsonscan.Reason
		if t.num {
			end, res = jsonscan.CheckNumber(data, q)
		} else {
			end, _, res = jsonscan.CheckString(data, q, jsonscan.Options{})
		}
		if res != jsonscan.OK {
			return "", false
		}
		if k == r.delta {
			text = jsonscan.Span{Start: int32(q), End: int32(end)}
		}
		q = end
	}
	if !bytes.Equal(data[q:], prev[p:]) {
		return "", false
	}
	return cloneText(gjson.Parse(bodyString(data[text.Start:text.End]))), true
}
