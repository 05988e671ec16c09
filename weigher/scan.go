package weigher

import (
	"bytes"
	"strings"
	"sync"

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
func (w *Weigher) parseRequest(body []byte, f *fields) (d doc, fallback Estimate, ok bool) {
	lay := layouts.Get().(*jsonscan.Layout)
	err := jsonscan.Check(body, jsonscan.Options{MaxDepth: w.maxDepth, FoldCase: true, UTF8: true, Layout: lay})
	if err == nil {
		d = doc{root: gjson.Parse(bodyString(bytes.TrimSpace(body))), body: bodyString(body), lay: lay}
		if lay.Dropped || w.noLayout { // too many members and elements to lay out: gjson finds them
			d.close()
		}
		if !d.root.IsObject() {
			d.close()
			fallback = w.Bytes(body, "")
			fallback.Fault, fallback.FaultDetail = FaultNotObject, notObjectDetail(d.root)
			return doc{}, fallback, false
		}
		key, field, fine := checkFields(d, f, w.cache)
		if fine {
			return d, Estimate{}, true
		}
		d.close()
		fallback = w.Bytes(body, "")
		fallback.Fault = FaultCaseVariantKey
		fallback.FaultDetail = "key " + shownKey(key) + " is the field " + shownKey(field) + " in another case"
		return doc{}, fallback, false
	}
	layouts.Put(lay)
	fallback = w.Bytes(body, "")
	fallback.Fault, fallback.FaultDetail = scanFault(body, err)
	switch fallback.Fault {
	case FaultTooDeep:
		fallback.TooDeep = true
	case FaultDuplicateKey, FaultCaseVariantKey:
		fallback.DuplicateKeys = true
	}
	return doc{}, fallback, false
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

// doc is a request body that passed parseRequest: its root object, and
// where jsonscan found its members and their arrays' elements, so that the
// readers walk them without scanning the body again. Call close when done
// (the layout is pooled); nothing read from it may be kept without a copy.
type doc struct {
	root gjson.Result
	body string
	lay  *jsonscan.Layout // nil after close, or when not recorded
}

// layouts pools the layouts of requests being weighed.
var layouts = sync.Pool{New: func() any { return new(jsonscan.Layout) }}

// maxPooledLayout is the most members plus elements a pooled layout keeps
// room for; a bigger one goes to the garbage collector.
const maxPooledLayout = 4096

// close returns d's layout to the pool.
func (d *doc) close() {
	if d.lay == nil {
		return
	}
	if cap(d.lay.Members)+cap(d.lay.Elems) <= maxPooledLayout {
		layouts.Put(d.lay)
	}
	d.lay = nil
}

// span is the text of sp.
func (d doc) span(sp jsonscan.Span) string { return d.body[sp.Start:sp.End] }

// members calls fn with each member of the root object, in order: its key
// (unescaped), its value, and the value's elements when it is an array; it
// stops when fn returns false.
func (d doc) members(fn func(key string, v gjson.Result, elems elements) bool) {
	if d.lay == nil {
		d.root.ForEach(func(k, v gjson.Result) bool { return fn(k.Str, v, elements{v: v}) })
		return
	}
	for _, m := range d.lay.Members {
		k := d.span(m.Key)
		if strings.IndexByte(k, '\\') >= 0 {
			k = gjson.Parse(k).Str
		} else {
			k = k[1 : len(k)-1]
		}
		v := gjson.Parse(d.span(m.Value))
		if !fn(k, v, elements{v: v, body: d.body, spans: d.lay.Elems[m.First:m.Last], laid: true}) {
			return
		}
	}
}

// elements are the elements of an array v: where the layout found them in
// body when laid, else found by gjson. An elements of a value that is not
// an array has none.
type elements struct {
	v     gjson.Result
	body  string
	spans []jsonscan.Span
	laid  bool
}

// each calls fn with each element, in order, until fn returns false.
func (e elements) each(fn func(gjson.Result) bool) {
	if !e.laid {
		if e.v.IsArray() {
			e.v.ForEach(func(_, v gjson.Result) bool { return fn(v) })
		}
		return
	}
	for _, sp := range e.spans {
		if !fn(gjson.Parse(e.body[sp.Start:sp.End])) {
			return
		}
	}
}
