package weigher

import (
	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// maxDupUsageBytes is the largest answer body dupKeyUsage reads, in bytes
// (8 MiB): it holds one rewrite of the body at a time, outside the answer
// budget, so it is kept to answers an upstream writes for a usage (a
// 128k-token answer is about 0.5 MiB); a larger one with a key named twice
// keeps its reservation, as every such answer did before.
const maxDupUsageBytes = 8 << 20

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
	if len(body) > maxDupUsageBytes {
		return Usage{}, false
	}
	// The duplicate check first: an answer without a duplicate (an error
	// body, the common case here) costs one flat pass. The check stops at
	// the first duplicate, so the whole body is then checked again.
	if jsonscan.ReasonOf(jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true})) != jsonscan.DuplicateKey ||
		jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth}) != nil {
		return Usage{}, false
	}
	// Read in place (gjson.ParseBytes would copy body), and both rewrites
	// into one buffer: a rewrite is never longer than body (it drops
	// members and the space between tokens, and copies the rest), so the
	// whole costs one body's length of memory.
	root := gjson.Parse(bodyString(body))
	buf := make([]byte, 0, len(body))
	first, okFirst := parseUsage(k, dedupeKeys(buf, root, false), maxDepth)
	last, okLast := parseUsage(k, dedupeKeys(buf, root, true), maxDepth)
	if !okFirst || !okLast {
		return Usage{}, false
	}
	return upper(first, last), true
}

// deduper rewrites documents with one member per key (dedupeKeys),
// reusing one key index and one member list per nesting level, so that a
// body of many small objects costs no allocation per object: its scratch
// grows to the widest object at each level, never with their number.
type deduper struct {
	last   bool
	levels []dedupeLevel
}

// dedupeLevel is the scratch of one nesting level.
type dedupeLevel struct {
	at      map[string]int
	members []dedupeMember
}

// dedupeMember is one kept member: its key and its value.
type dedupeMember struct {
	raw string // the key as the document writes it, quoted
	val gjson.Result
}

// dedupeKeys appends v, a value of a document jsonscan checked (so its
// nesting is bounded), to dst with every object keeping one member per key
// (compared unescaped): its last when last is set, else its first, at the
// place of that key's first member. Scalars are copied as they are.
func dedupeKeys(dst []byte, v gjson.Result, last bool) []byte {
	d := deduper{last: last}
	return d.value(dst, v, 0)
}

// value appends v, at nesting level depth, to dst.
func (d *deduper) value(dst []byte, v gjson.Result, depth int) []byte {
	switch {
	case v.IsObject():
		for len(d.levels) <= depth { // arrays open levels without objects
			d.levels = append(d.levels, dedupeLevel{at: map[string]int{}})
		}
		l := &d.levels[depth]
		clear(l.at)
		l.members = l.members[:0]
		v.ForEach(func(k, val gjson.Result) bool {
			name := k.String()
			if i, seen := l.at[name]; seen {
				if d.last {
					l.members[i].val = val
				}
				return true
			}
			l.at[name] = len(l.members)
			l.members = append(l.members, dedupeMember{k.Raw, val})
			return true
		})
		dst = append(dst, '{')
		// The members are read by index: a deeper object reuses the
		// levels below, never this one.
		for i := 0; i < len(d.levels[depth].members); i++ {
			m := d.levels[depth].members[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, m.raw...)
			dst = append(dst, ':')
			dst = d.value(dst, m.val, depth+1)
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
			dst = d.value(dst, val, depth+1)
			return true
		})
		return append(dst, ']')
	default:
		return append(dst, v.Raw...)
	}
}
