package weigher

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// DefaultMaxDepth is the nesting limit of [Options.MaxDepth] when it is 0:
// at most 128 arrays and objects open at once (jsonscan.DefaultMaxDepth).
const DefaultMaxDepth = jsonscan.DefaultMaxDepth

// MaxMaxDepth is the largest [Options.MaxDepth] New accepts: the limit of
// encoding/json, and far below what the recursive parsers that follow the
// flat scan can take on a goroutine stack.
const MaxMaxDepth = 10000

// parseRequest checks a request body in one flat pass (jsonscan: strict RFC
// 8259 syntax in UTF-8 without a byte-order mark, nesting within w's limit,
// no key named twice in an object, not even in another case) and parses it
// with gjson only when it passed, so no recursive parser ever sees an
// unbounded document; then it checks that no object the weigher reads
// (described by f) holds one of its fields in another case. ok is true for
// a JSON object that passed all of it; otherwise fallback is the estimate to
// return: the byte-based [Weigher.Bytes], with Parsed false and Fault (and
// TooDeep or DuplicateKeys) saying why.
func (w *Weigher) parseRequest(body []byte, f *fields) (root gjson.Result, fallback Estimate, ok bool) {
	err := jsonscan.Check(body, jsonscan.Options{MaxDepth: w.maxDepth, FoldCase: true, UTF8: true})
	if err == nil {
		root = gjson.Parse(bodyString(bytes.TrimSpace(body)))
		if !root.IsObject() {
			fallback = w.Bytes(body, "")
			fallback.Fault, fallback.FaultDetail = FaultNotObject, notObjectDetail(root)
			return gjson.Result{}, fallback, false
		}
		key, field, fine := checkFields(root, f)
		if fine {
			return root, Estimate{}, true
		}
		fallback = w.Bytes(body, "")
		fallback.Fault = FaultCaseVariantKey
		fallback.FaultDetail = "key " + shownKey(key) + " is the field " + shownKey(field) + " in another case"
		return gjson.Result{}, fallback, false
	}
	fallback = w.Bytes(body, "")
	fallback.Fault, fallback.FaultDetail = scanFault(body, err)
	switch fallback.Fault {
	case FaultTooDeep:
		fallback.TooDeep = true
	case FaultDuplicateKey, FaultCaseVariantKey:
		fallback.DuplicateKeys = true
	}
	return gjson.Result{}, fallback, false
}

// parseObject checks an upstream document (an SSE event's data) in one
// flat pass, nesting within maxDepth (0: DefaultMaxDepth), and returns it
// parsed; ok only when it is a valid JSON object. Deeper or invalid data is
// not read: the stream is then settled from what was read elsewhere. The
// result aliases b.
func parseObject(b []byte, maxDepth int) (gjson.Result, bool) {
	if jsonscan.Check(b, jsonscan.Options{MaxDepth: maxDepth}) != nil {
		return gjson.Result{}, false
	}
	root := gjson.Parse(bodyString(bytes.TrimSpace(b)))
	return root, root.IsObject()
}

// upstreamDoc checks an upstream JSON answer like parseObject and returns
// it as a string view (aliasing body) when it is valid JSON.
func upstreamDoc(body []byte, maxDepth int) (string, bool) {
	if jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth}) != nil {
		return "", false
	}
	return bodyString(body), true
}
