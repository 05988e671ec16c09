package weigher

import (
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// dupKeyUsage reads the usage of k's answer body when body is valid JSON,
// nested at most maxDepth levels (0: DefaultMaxDepth), that names a key
// twice in some object — a shape the ordinary readers refuse. RFC 8259 §4
// leaves such objects to each parser: gjson and some upstreams keep the
// first value, Python's json, encoding/json and most gateways the last, so
// the upstream may have billed either reading. The body is rewritten both
// ways (firstWins, lastWins) and each rewrite read by k's usage reader;
// when both are readable the answer settles at their dearer reading
// (upper), so that two usage objects (a gateway's appended to the
// upstream's) or a figure named twice never settle below what either
// reading reports. ok is false when body is not such a document or either
// reading is unreadable: the caller then keeps its reservation.
func dupKeyUsage(k Kind, body []byte, maxDepth int) (Usage, bool) {
	// The duplicate check first: an answer without a duplicate (an error
	// body, the common case here) costs one flat pass. The check stops at
	// the first duplicate, so the whole body is then checked again.
	if jsonscan.ReasonOf(jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true})) != jsonscan.DuplicateKey ||
		jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth}) != nil {
		return Usage{}, false
	}
	root := gjson.ParseBytes(body)
	first, okFirst := parseUsage(k, dedupeKeys(nil, root, false), maxDepth)
	last, okLast := parseUsage(k, dedupeKeys(nil, root, true), maxDepth)
	if !okFirst || !okLast {
		return Usage{}, false
	}
	return upper(first, last), true
}

// dedupeKeys appends v, a value of a document jsonscan checked (so its
// nesting is bounded), to dst with every object keeping one member per key
// (compared unescaped): its last when last is set, else its first, at the
// place of that key's first member. Scalars are copied as they are.
func dedupeKeys(dst []byte, v gjson.Result, last bool) []byte {
	switch {
	case v.IsObject():
		type member struct {
			key string
			val gjson.Result
		}
		var members []member
		at := map[string]int{}
		v.ForEach(func(k, val gjson.Result) bool {
			name := k.String()
			if i, seen := at[name]; seen {
				if last {
					members[i].val = val
				}
				return true
			}
			at[name] = len(members)
			members = append(members, member{name, val})
			return true
		})
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			key, _ := json.Marshal(m.key) // a string always marshals
			dst = append(dst, key...)
			dst = append(dst, ':')
			dst = dedupeKeys(dst, m.val, last)
		}
		return append(dst, '}')
	case v.IsArray():
		dst = append(dst, '[')
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			if i > 0 {
				dst = append(dst, ',')
			}
			i++
			dst = dedupeKeys(dst, val, last)
			return true
		})
		return append(dst, ']')
	default:
		return append(dst, v.Raw...)
	}
}
