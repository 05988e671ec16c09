package weigher

import "github.com/llmguard/llmguard/internal/jsonscan"

// DuplicateKeys reports whether any object in the JSON document body names a
// key twice (after unescaping, so "max_tokens" and "max\u005ftokens" are the
// same key), or nests deeper than [DefaultMaxDepth] levels. RFC 8259 §4
// leaves the meaning of such objects to each parser: gjson keeps the first
// value, Python's json and many upstreams the last. A proxy that weighs one
// reading while the upstream serves the other can be made to reserve nothing
// for a large answer, so llmguard refuses such bodies. Not-JSON input
// reports false. The check is one flat pass (jsonscan), linear in the body
// whatever its shape; [Weigher.Weigh] makes it as part of its own scan.
func DuplicateKeys(body []byte) bool {
	switch jsonscan.ReasonOf(jsonscan.Check(body, jsonscan.Options{DuplicateKeys: true})) {
	case jsonscan.DuplicateKey, jsonscan.TooDeep:
		return true
	}
	return false
}
