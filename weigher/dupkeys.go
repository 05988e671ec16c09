package weigher

import "github.com/tidwall/gjson"

// maxJSONDepth bounds the nesting DuplicateKeys walks; deeper documents are
// reported as ambiguous too.
const maxJSONDepth = 128

// DuplicateKeys reports whether any object in the JSON document body names a
// key twice (after unescaping, so "max_tokens" and "max\u005ftokens" are the
// same key), or nests deeper than 128 levels. RFC 8259 §4 leaves the meaning
// of such objects to each parser: gjson keeps the first value, Python's json
// and many upstreams the last. A proxy that weighs one reading while the
// upstream serves the other can be made to reserve nothing for a large
// answer, so llmguard refuses such bodies. Not-JSON input reports false.
func DuplicateKeys(body []byte) bool {
	if !gjson.ValidBytes(body) {
		return false
	}
	return duplicateIn(gjson.ParseBytes(body), 0)
}

func duplicateIn(v gjson.Result, depth int) bool {
	if !v.IsObject() && !v.IsArray() {
		return false
	}
	if depth >= maxJSONDepth {
		return true
	}
	dup := false
	var small [16]string
	keys := small[:0]
	var seen map[string]struct{}
	v.ForEach(func(k, e gjson.Result) bool {
		if v.IsObject() {
			name := k.String()
			if seen != nil {
				if _, ok := seen[name]; ok {
					dup = true
					return false
				}
				seen[name] = struct{}{}
			} else {
				for _, prev := range keys {
					if prev == name {
						dup = true
						return false
					}
				}
				keys = append(keys, name)
				if len(keys) == len(small) {
					seen = make(map[string]struct{}, 2*len(small))
					for _, key := range keys {
						seen[key] = struct{}{}
					}
				}
			}
		}
		if duplicateIn(e, depth+1) {
			dup = true
			return false
		}
		return true
	})
	return dup
}
