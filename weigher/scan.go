package weigher

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"sync"
	"unsafe"

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
// unbounded document (the elements the count cache marks as having passed
// that scan and the field check before, byte for byte, are skipped
// unchecked: see elemMemo.Vouch); then it checks that no object the weigher reads
// (described by f) holds one of its fields in another case. ok is true for
// a JSON object that passed all of it; otherwise fallback is the estimate to
// return: the byte-based [Weigher.Bytes], with Parsed false and Fault (and
// TooDeep or DuplicateKeys) saying why.
func (w *Weigher) parseRequest(body []byte, f *fields) (d doc, fallback Estimate, ok bool) {
	return w.parseRequestFrom(body, f, resumeOff)
}

// resumeMode says whether parseRequestFrom looks for a resume point.
type resumeMode uint8

const (
	resumeOff  resumeMode = iota // scan the whole body
	resumeOn                     // resume at a checkpoint of the body's prefix, when one is found
	resumeKeep                   // scan the whole body, and let it file its checkpoint
)

// parseRequestFrom is parseRequest that, with resumeOn (and the count
// cache on, no counting budget, the layout recorded), scans from the
// resume point of a remembered prefix of body (resume.go): the doc's
// layout then holds the top-level members, but of the array the
// checkpoint ends in only the elements after it, and its memo says so
// (resumedSum; keepResumePoint files the body's own).
func (w *Weigher) parseRequestFrom(body []byte, f *fields, mode resumeMode) (d doc, fallback Estimate, ok bool) {
	return w.parseRequestWith(body, parseOptions{fields: f, resume: mode})
}

// parseOptions say how parseRequestWith reads a body. The zero value is
// not usable: fields must be set.
type parseOptions struct {
	fields *fields    // the body's top-level object's
	resume resumeMode // whether to resume from a remembered prefix
	// counted, when set, are the fields of the elements of a top-level
	// array (chat's "messages": chatMessageFields, at depth 2) whose
	// field check the caller makes in the walk that counts them, for the
	// elements the count cache does not remember (elemMemo.countChecked,
	// messageTally): parseRequestWith leaves them unchecked, and when
	// another member fails its check it names the key the whole check
	// (every element) finds first. The caller must count every element
	// of that array through countChecked, and, when one fails (or
	// elemMemo.unchecked), check the doc with checkFields and no memo.
	counted *fields
	// countedList, when set, are the fields of the objects of a
	// top-level list checked whole (chat's "tools": toolFields, at
	// depth 1) whose field check, when the count cache does not remember
	// the list, the caller makes in the walk that counts it
	// (elemMemo.countChecked with toolsCounter.countChecked): the check
	// leaves such a list pending. The caller must count that list
	// through countChecked, and, when it fails, refuse the body as a
	// failed check of its member does (fallbackModelsKey, then
	// checkFields with no memo). Only with callerChecks.
	countedList *fields
	// callerChecks: the caller field-checks the top-level members itself,
	// in its walk of them (checkMember with fields and the doc's memo, in
	// order, stopping at the first that fails), and names a failure's key
	// with checkFields and no memo: parseRequestWith does not check them.
	// It also looks for a fallback model field in that walk
	// (fallbackMember, before checkMember, stopping at the first), and
	// refuses the body as parseRequestWith would (fallbackFault) when it
	// finds one, or when a member failed its check and fallbackModelsKey
	// finds one anywhere: the fault is the one a separate walk for the
	// fallback fields, before the field check, gave.
	callerChecks bool
}

// reusedMembers are the members whose object values a request's scan
// remembers and steps over when it meets them again unchanged
// (jsonscan.Options.Reuse): the JSON schema of a tool's parameters (chat,
// Responses: "parameters"; Messages: "input_schema"), which clients send
// unchanged with every request even where the list around them changes.
var reusedMembers = []string{"parameters", "input_schema"}

// parseRequestWith is parseRequestFrom with the options o.
func (w *Weigher) parseRequestWith(body []byte, o parseOptions) (d doc, fallback Estimate, ok bool) {
	f, mode := o.fields, o.resume
	memo := w.cache.memo(bodyString(body), f, w.maxDepth)
	lay := layoutOf(memo)
	// With the counted elements' field check left to the caller's walk
	// (chat's messages), the scan records their members too
	// (Layout.Fields), for that walk to step through (laidMembers).
	opts := jsonscan.Options{MaxDepth: w.maxDepth, FoldCase: true, UTF8: true, Layout: lay, Fields: o.counted != nil && !w.noFields, Reuse: reusedMembers}
	if memo != nil { // elements the cache has seen pass are not scanned again
		memo.offerAll = w.offerAll
		opts.Known = memo
		if mode != resumeOff && w.budget == nil && !w.noLayout {
			opts.Resume = memo.resumePoint(f, lay, mode == resumeOn)
			if opts.Resume > 0 {
				opts.Tail = memo // its checkpoint's tail (resume.go)
			}
		}
		if o.counted != nil {
			memo.deferCtx = memo.fieldsContext(o.counted, 2)
		}
		if o.countedList != nil && o.callerChecks {
			memo.deferList = o.countedList
		}
	}
	err := jsonscan.Check(body, opts)
	if opts.Resume > 0 && !lay.Resumed {
		memo.resume.resumed = false // scanned whole after all: the layout did not fit
	}
	if err == nil && opts.Resume > 0 && lay.Dropped {
		// Too many new members and elements to lay out: gjson would find
		// the remembered elements too. Weigh it whole.
		putLayoutOf(memo, lay)
		memo.done()
		o.resume = resumeKeep
		return w.parseRequestWith(body, o)
	}
	if err == nil {
		d = doc{root: gjson.Parse(bodyString(bytes.TrimSpace(body))), body: bodyString(body), lay: lay, memo: memo}
		if lay.Dropped || w.noLayout { // too many members and elements to lay out: gjson finds them
			d.dropLayout()
		}
		if !d.root.IsObject() {
			d.close()
			fallback = w.Bytes(body, "")
			fallback.Fault, fallback.FaultDetail = FaultNotObject, notObjectDetail(d.root)
			return doc{}, fallback, false
		}
		if o.callerChecks {
			return d, Estimate{}, true
		}
		if k, f := fallbackModelsKey(d); k != "" {
			d.close()
			return doc{}, w.fallbackFault(body, k, f), false
		}
		key, field, fine := checkFields(d, f, d.memo)
		if fine {
			return d, Estimate{}, true
		}
		if d.memo.unchecked() {
			// An element left to the counter may hold a variant before
			// key: the whole check names the first.
			key, field, _ = checkFields(d, f, nil)
		}
		d.close()
		return doc{}, w.caseVariant(body, key, field), false
	}
	putLayoutOf(memo, lay)
	memo.done() // nothing to write: the field check did not run
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

// fallbackFault is the estimate of a body refused for naming a model
// outside its "model", or for an extra_body a gateway would merge (key and
// f from fallbackModelsKey or fallbackMember): the byte-based
// [Weigher.Bytes], with Parsed false and Fault f (FaultModelOutsideBody or
// FaultExtraBody).
func (w *Weigher) fallbackFault(body []byte, key string, f Fault) Estimate {
	e := w.Bytes(body, "")
	e.Fault, e.FaultDetail = f, "key "+shownKey(key)
	return e
}

// caseVariant is the estimate of a body refused for holding key, a
// variant of the field in another case: the byte-based [Weigher.Bytes],
// with Parsed false and Fault FaultCaseVariantKey.
func (w *Weigher) caseVariant(body []byte, key, field string) Estimate {
	e := w.Bytes(body, "")
	e.Fault = FaultCaseVariantKey
	e.FaultDetail = "key " + shownKey(key) + " is the field " + shownKey(field) + " in another case"
	return e
}

// parseObject checks an upstream document (an SSE event's data) in one
// flat pass, nesting within maxDepth (0: DefaultMaxDepth), with no key
// named twice in an object, and returns it parsed; ok only when it is such
// a JSON object. Anything else is not read ([StreamUpdate.Unread]): the
// readers find members by gjson's paths (the first of a name) where the
// caller's SDK keeps the last, and an SDK reads deeper data than the limit.
// The result aliases b.
func parseObject(b []byte, maxDepth int) (gjson.Result, bool) {
	if jsonscan.Check(b, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true}) != nil {
		return gjson.Result{}, false
	}
	root := gjson.Parse(bodyString(bytes.TrimSpace(b)))
	return root, root.IsObject()
}

// blank reports whether an event's data is empty or only whitespace: it
// holds nothing a reader (or an SDK) could take output or usage from, so it
// is skipped rather than counted as unread.
func blank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// upstreamMembers checks an upstream JSON answer like parseObject and,
// when it is valid JSON with no key named twice in an object, returns its
// top-level members named a and b (b "": none), each as gjson.Get(answer,
// name) gives it (the zero Result when absent). The members are found in
// the layout the checking pass records, not by a second scan of the
// answer (gjson's Get scans from the start, and a usage object often comes
// last); a layout cut short (Layout.Dropped) falls back to gjson.Get. An
// answer naming a key twice is unreadable (ok false), as gjson keeps the
// first and a JSON SDK the last, so an answer with a small "usage" before
// the real one would be charged the small one
// (TestUpstreamUsageDuplicateMember); the caller keeps its reservation.
// An ordinary answer is read in one pass (answerScan); one that pass does
// not decide, by upstreamMembersChecked, with the same result.
func upstreamMembers(body []byte, maxDepth int, a, b string) (va, vb gjson.Result, ok bool) {
	s := newAnswerScan(a, b, false)
	if s.scan(body, maxDepth) {
		return s.member(body, slotA), s.member(body, slotB), true
	}
	return upstreamMembersChecked(body, maxDepth, a, b)
}

// upstreamMembersChecked is upstreamMembers for any answer: jsonscan's
// check, then the members found in the layout it records.
func upstreamMembersChecked(body []byte, maxDepth int, a, b string) (va, vb gjson.Result, ok bool) {
	va, vb, _, ok = upstreamMembers3(body, maxDepth, a, b, "")
	return va, vb, ok
}

// upstreamMembersTier is upstreamMembers that also reads the answer's
// top-level service_tier in the same pass: tier is the service tier it
// names (servedTier: "" for none).
func upstreamMembersTier(body []byte, maxDepth int, a, b string) (va, vb gjson.Result, tier string, ok bool) {
	s := newAnswerScan(a, b, false)
	s.askTier()
	if s.scan(body, maxDepth) {
		return s.member(body, slotA), s.member(body, slotB), s.servedTier(body), true
	}
	va, vb, vt, ok := upstreamMembers3(body, maxDepth, a, b, "service_tier")
	return va, vb, servedTier(vt.Raw), ok
}

// upstreamMembers3 is upstreamMembersChecked for three members, a, b and
// c (b, c "": none).
func upstreamMembers3(body []byte, maxDepth int, a, b, c string) (va, vb, vc gjson.Result, ok bool) {
	lay := layouts.Get().(*jsonscan.Layout)
	defer putLayout(lay)
	if jsonscan.Check(body, jsonscan.Options{MaxDepth: maxDepth, DuplicateKeys: true, Layout: lay}) != nil {
		return va, vb, vc, false
	}
	s := bodyString(body)
	if lay.Dropped {
		va = gjson.Get(s, a)
		if b != "" {
			vb = gjson.Get(s, b)
		}
		if c != "" {
			vc = gjson.Get(s, c)
		}
		return va, vb, vc, true
	}
	doc{body: s, lay: lay}.walkKeys(false, func(k string) bool { return k == a || b != "" && k == b || c != "" && k == c },
		func(k string, v gjson.Result, _ elements) bool {
			switch k {
			case a:
				va = v
			case b:
				vb = v
			default:
				vc = v
			}
			return true
		})
	return va, vb, vc, true
}

// doc is a request body that passed parseRequest: its root object, and
// where jsonscan found its members and their arrays' elements, so that the
// readers walk them without scanning the body again. Call close when done
// (the layout is pooled); nothing read from it may be kept without a copy.
type doc struct {
	root gjson.Result
	body string
	lay  *jsonscan.Layout // nil after close, or when not recorded
	// memo holds what the field check found in the count cache, for the
	// counters (nil: caching off, or after close).
	memo *elemMemo
}

// layouts pools the layouts of requests being weighed.
var layouts = sync.Pool{New: func() any { return new(jsonscan.Layout) }}

// maxPooledLayout is the most members, elements and fields a pooled layout keeps
// room for; a bigger one goes to the garbage collector.
const maxPooledLayout = 4096

// putLayout returns lay to the pool unless it grew past maxPooledLayout.
func putLayout(lay *jsonscan.Layout) {
	if cap(lay.Members)+cap(lay.Elems)+cap(lay.Fields) <= maxPooledLayout {
		layouts.Put(lay)
	}
}

// close writes what d's memo holds to the count cache and returns d's memo
// and layout to their pools: the layout first, as it may be the memo's
// (layoutOf).
func (d *doc) close() {
	d.dropLayout()
	d.memo.done()
	d.memo = nil
}

// dropLayout returns d's layout to its pool (when it is not its memo's,
// which the memo keeps): d's readers then find members and elements with
// gjson.
func (d *doc) dropLayout() {
	if d.lay == nil {
		return
	}
	if (d.memo == nil || d.lay != &d.memo.lay) && cap(d.lay.Members)+cap(d.lay.Elems)+cap(d.lay.Fields) <= maxPooledLayout {
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
	d.walk(false, fn)
}

// walk is members, with values and elements as rawValue gives them when
// raw (strings not decoded: for walks that read keys only).
func (d doc) walk(raw bool, fn func(key string, v gjson.Result, elems elements) bool) {
	d.walkKeys(raw, nil, fn)
}

// walkKeys is walk over the members whose key want accepts (nil: every
// member); the others are stepped over without their value being made
// into a gjson.Result (for a reader that wants a few members of many).
func (d doc) walkKeys(raw bool, want func(key string) bool, fn func(key string, v gjson.Result, elems elements) bool) {
	if d.lay == nil {
		if raw {
			rawMembers(d.root.Raw, func(k string, v gjson.Result) bool {
				if want != nil && !want(k) {
					return true
				}
				return fn(k, v, elements{v: v, raw: true})
			})
		} else {
			lead := len(d.body) - len(strings.TrimLeft(d.body, " \t\r\n")) // where root starts in body
			d.root.ForEach(func(k, v gjson.Result) bool {
				if want != nil && !want(k.Str) {
					return true
				}
				at := jsonscan.Span{Start: int32(lead + v.Index), End: int32(lead + v.Index + len(v.Raw))}
				return fn(k.Str, v, elements{v: v, at: at})
			})
		}
		return
	}
	for _, m := range d.lay.Members {
		k := d.span(m.Key)
		if strings.IndexByte(k, '\\') >= 0 {
			k = gjson.Parse(k).Str
		} else {
			k = k[1 : len(k)-1]
		}
		if want != nil && !want(k) {
			continue
		}
		var v gjson.Result
		if raw {
			v = rawValue(d.span(m.Value))
		} else {
			v = gjson.Parse(d.span(m.Value))
		}
		elems := elements{v: v, body: d.body, spans: d.lay.Elems[m.First:m.Last], laid: true, raw: raw, at: m.Value}
		if m.Unlaid { // a list stepped over whole: its elements are found in v
			elems = elements{v: v, raw: raw, at: m.Value, remembered: true}
		}
		if !fn(k, v, elems) {
			return
		}
	}
}

// topIter steps through the members of a doc's root object as walk gives
// them, without a callback: after each next that returns true, k and v
// hold the member (k its key, unescaped; v its value, as rawValue gives
// it when raw, else parsed) and elements gives its elements, as walk
// gives them. With the layout it reads Layout.Members in place, where
// walk's callback cost a warm 1 KiB chat body (chatFrom's five members)
// its closure's set-up and per member a copy of the elements (144 bytes,
// built for every member where chat reads those of three) and of v (80),
// and every captured variable read through a pointer
// (TestTopIterSameAsWalk, FuzzTopIterSameAsWalk). Without one, the
// members are collected from walk first (allocated: the reference path).
// The zero value yields nothing; not safe for concurrent use.
type topIter struct {
	body    string
	members []jsonscan.Member // the layout's, when it has one
	elemsAt []jsonscan.Span   // the layout's Elems
	all     []walked          // without a layout: walk's members
	i       int               // the next member's index
	raw     bool
	k       string
	v       gjson.Result
}

// walked is one member as walk gave it (topIter without a layout).
type walked struct {
	k     string
	v     gjson.Result
	elems elements
}

// topMembers starts an iteration of d's root object's members, raw as
// for walk(raw, …).
func (d *doc) topMembers(raw bool) topIter {
	if d.lay != nil {
		return topIter{body: d.body, members: d.lay.Members, elemsAt: d.lay.Elems, raw: raw}
	}
	it := topIter{raw: raw}
	d.walk(raw, func(k string, v gjson.Result, elems elements) bool {
		it.all = append(it.all, walked{k: k, v: v, elems: elems})
		return true
	})
	if it.all == nil {
		it.all = []walked{} // no member: not the layout's path
	}
	return it
}

// next steps to the next member and reports whether there is one.
func (it *topIter) next() bool {
	i := it.i
	if it.all != nil {
		if i >= len(it.all) {
			return false
		}
		it.k, it.v, it.i = it.all[i].k, it.all[i].v, i+1
		return true
	}
	if i >= len(it.members) {
		return false
	}
	it.i = i + 1
	m := &it.members[i]
	k := it.body[m.Key.Start:m.Key.End]
	if strings.IndexByte(k, '\\') >= 0 {
		k = gjson.Parse(k).Str
	} else {
		k = k[1 : len(k)-1]
	}
	it.k = k
	val := it.body[m.Value.Start:m.Value.End]
	if it.raw {
		it.v = rawValue(val)
	} else {
		it.v = gjson.Parse(val)
	}
	return true
}

// elements is the current member's elements (after next returned true),
// with its value v as next gave it (or as the caller changed it since:
// chat parses some scalars), as walk gives them.
func (it *topIter) elements(v gjson.Result) elements {
	i := it.i - 1
	if it.all != nil {
		e := it.all[i].elems
		e.v = v
		return e
	}
	m := &it.members[i]
	if m.Unlaid { // a list stepped over whole: its elements are found in v
		return elements{v: v, raw: it.raw, at: m.Value, remembered: true}
	}
	return elements{v: v, body: it.body, spans: it.elemsAt[m.First:m.Last], laid: true, raw: it.raw, at: m.Value}
}

// remembered is elements(v).remembered without building the elements.
func (it *topIter) remembered() bool {
	i := it.i - 1
	if it.all != nil {
		return it.all[i].elems.remembered
	}
	return it.members[i].Unlaid
}

// at is elements(v).at without building the elements.
func (it *topIter) at() jsonscan.Span {
	i := it.i - 1
	if it.all != nil {
		return it.all[i].elems.at
	}
	return it.members[i].Value
}

// elements are the elements of an array v: where the layout found them in
// body when laid, else found by gjson. An elements of a value that is not
// an array has none.
type elements struct {
	v     gjson.Result
	body  string
	spans []jsonscan.Span
	laid  bool
	// raw: the elements are given as rawValue gives them, strings not
	// decoded (for walks that read keys only).
	raw bool
	// at is where the member's value lies in the body weighed, as byte
	// offsets [Start, End): set by members (not by raw walks), for the
	// values the proxy may rewrite (OutputFields).
	at jsonscan.Span
	// remembered: v is a top-level list laid out Unlaid (walkKeys), whose
	// exact bytes an earlier body passed with: the strict scan stepped
	// over it whole because the count cache holds its field check's mark
	// (elemMemo.Vouch), or a resume point of an earlier body carried it
	// (keepResumePoint). A list's mark is written only for a body whose
	// fallback check passed too (fallbackModelsKey before checkFields,
	// or chat's fallbackMember before checkMember, member by member), and
	// a point is filed only for a body weighed whole without a fault, so
	// a remembered "tools" list holds no advisor tool (advisorTools).
	remembered bool
}

// elemValue is the element v as elements give them: as rawValue gives
// it when raw, else parsed by gjson. A function of the flag alone, not a
// method of elements: the call copied the elements (about 170 bytes) for
// every element, some 60 instructions of each of a warm 1 KiB chat
// body's message visits.
func elemValue(raw bool, v string) gjson.Result {
	if raw {
		return rawValue(v)
	}
	return gjson.Parse(v)
}

// each calls fn with each element, in order, until fn returns false.
func (e elements) each(fn func(gjson.Result) bool) {
	e.eachAt(func(v gjson.Result, _ jsonscan.Span) bool { return fn(v) })
}

// eachAt is each, also giving the element's span in the body when the
// layout found it (laid), else the zero Span.
func (e elements) eachAt(fn func(v gjson.Result, at jsonscan.Span) bool) {
	switch {
	case !e.v.IsArray():
	case e.laid:
		for _, sp := range e.spans {
			if !fn(elemValue(e.raw, e.body[sp.Start:sp.End]), sp) {
				return
			}
		}
	case e.raw:
		rawElements(e.v.Raw, func(v gjson.Result) bool { return fn(v, jsonscan.Span{}) })
	default:
		e.v.ForEach(func(_, v gjson.Result) bool { return fn(v, jsonscan.Span{}) })
	}
}

// laidMembers are the members of one object element of a top-level
// array as the strict scan recorded them (jsonscan.Layout.Fields, found
// by fieldsOf), so that a walk of a new element steps through them
// without finding its keys and values again (memberWalk: keyStop and
// jsonscan.Skip over each value, strings included). The zero value holds
// none: its walk is rawMembers'.
type laidMembers struct {
	body   string
	fields []jsonscan.Member
}

// fieldsOf is the members of the element at (as elements.eachAt gives
// it) as the scan recorded them; the zero laidMembers when it did not
// (no layout, a span not given, an element vouched for or not scanned
// with jsonscan.Options.Fields, an object without members).
func (d doc) fieldsOf(at jsonscan.Span) laidMembers {
	if d.lay == nil || at.End <= at.Start {
		return laidMembers{}
	}
	f, ok := d.lay.FieldsOf(at)
	if !ok {
		return laidMembers{}
	}
	return laidMembers{body: d.body, fields: f}
}

// fieldsFrom is fieldsOf(at) for a walk of a top-level array's elements
// in order, at a span the layout found: the search for at's members goes
// forward from the layout's field from (what the call for the element
// before at returned as next, 0 for the first), not by fieldsOf's binary
// search, and d is not copied (a doc is some 130 bytes): fieldsOf cost a
// warm 1 KiB chat body's messages about 400 instructions under
// callgrind, fieldsFrom about 240. next is the first field past at's
// (TestFieldsFromSameAsFieldsOf).
func (d *doc) fieldsFrom(at jsonscan.Span, from int) (l laidMembers, next int) {
	if d.lay == nil || d.lay.Dropped || d.lay.FieldsDropped {
		return laidMembers{}, from
	}
	f := d.lay.Fields
	lo := from
	for lo < len(f) && f[lo].Key.Start < at.Start {
		lo++
	}
	end := lo
	for end < len(f) && f[end].Key.Start < at.End {
		end++
	}
	if end == lo {
		return laidMembers{}, end
	}
	return laidMembers{body: d.body, fields: f[lo:end]}, end
}

// each calls fn with each member of obj, an object element as it passed
// jsonscan, in order, until fn returns false, as rawMembers(obj, fn)
// does: its key (unescaped) and its value as rawValue gives it; from the
// recorded members when l holds them (they are obj's: fieldsOf), else by
// rawMembers.
func (l laidMembers) each(obj string, fn func(key string, v gjson.Result) bool) {
	if len(l.fields) == 0 {
		rawMembers(obj, fn)
		return
	}
	for _, f := range l.fields {
		k := l.body[f.Key.Start+1 : f.Key.End-1]
		if strings.IndexByte(k, '\\') >= 0 {
			k = gjson.Parse(l.body[f.Key.Start:f.Key.End]).Str
		}
		if !fn(k, rawValue(l.body[f.Value.Start:f.Value.End])) {
			return
		}
	}
}

// rawMembers calls fn with each member of obj, the text of a JSON object
// that passed jsonscan, in order, until fn returns false: its key
// (unescaped) and its value as rawValue gives it. Unlike gjson's ForEach it
// decodes no string value, for walks that read keys only (checkFields).
func rawMembers(obj string, fn func(key string, v gjson.Result) bool) {
	w := newMemberWalk(obj)
	for {
		key, ok := w.key()
		if !ok || !fn(key, w.value()) {
			return
		}
	}
}

// memberWalk steps through the members of obj, the text (from its '{')
// of a JSON object that passed jsonscan, without a callback: key gives
// each member's key and value (or skipTo) steps over its value. It reads
// nothing past the object's '}' (obj may go on after it), holds two words
// and allocates nothing but an unescaped key. rawMembers is a loop over it.
type memberWalk struct {
	obj string
	i   int // the next key's opening quote, or the object's '}'
}

// newMemberWalk starts a walk of the object at the start of obj.
func newMemberWalk(obj string) memberWalk { return memberWalk{obj: obj, i: skipSpace(obj, 1)} } // past '{'

// key returns the next member's key (unescaped) and leaves the walk at its
// value; ok is false when the object has no more members (the walk is at
// its '}': at returns where).
func (w *memberWalk) key() (key string, ok bool) {
	obj, i := w.obj, w.i
	if i >= len(obj) || obj[i] != '"' {
		return "", false
	}
	key, kEnd := readKey(obj, i)
	i = skipSpace(obj, kEnd) + 1 // past ':'
	w.i = skipSpace(obj, i)
	return key, true
}

// readKey returns the key (unescaped) of a checked object whose opening
// quote is s[i], and the offset just past its closing quote. A key is
// short and rarely escaped: keyStop finds its closing quote or its first
// backslash, a word at a time, where jsonscan.Skip's call and search cost
// about 70 instructions a key more; only an escaped key takes
// skipString's search (which honours escapes) and gjson's unescaping.
func readKey(s string, i int) (key string, end int) {
	end = keyStop(s, i+1)
	if end < len(s) && s[end] == '"' {
		return s[i+1 : end], end + 1
	}
	end = skipString(s, i)
	return gjson.Parse(s[i:end]).Str, end
}

// at is the offset in obj of the current value (after key) or of the
// object's '}' (after key returned false).
func (w *memberWalk) at() int { return w.i }

// value returns the current member's value as rawValue gives it and steps
// past it to the next key.
func (w *memberWalk) value() gjson.Result {
	end := skipValue(w.obj, w.i)
	v := rawValue(w.obj[w.i:end])
	w.skipTo(end)
	return v
}

// text returns the current member's value as written (valid JSON, never
// empty) and steps past it to the next key: value without making it a
// gjson.Result.
func (w *memberWalk) text() string {
	end := skipValue(w.obj, w.i)
	v := w.obj[w.i:end]
	w.skipTo(end)
	return v
}

// skipTo steps to the next key from end, the offset just past the current
// value.
func (w *memberWalk) skipTo(end int) {
	i := skipSpace(w.obj, end)
	if i < len(w.obj) && w.obj[i] == ',' {
		i = skipSpace(w.obj, i+1)
	}
	w.i = i
}

// rawElements calls fn with each element of arr, the text of a JSON array
// that passed jsonscan, as rawValue gives it, until fn returns false.
func rawElements(arr string, fn func(v gjson.Result) bool) {
	i := skipSpace(arr, 1) // past '['
	for i < len(arr) && arr[i] != ']' {
		end := skipValue(arr, i)
		if !fn(rawValue(arr[i:end])) {
			return
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

// rawValue is the JSON value v (valid, without surrounding space) as a
// gjson.Result of the right Type whose Raw is v, without decoding it: a
// string's Str and a number's Num are left empty. Objects and arrays read
// as gjson reads them (their Raw is all gjson needs).
func rawValue(v string) gjson.Result {
	r := gjson.Result{Raw: v}
	switch v[0] {
	case '{', '[':
		r.Type = gjson.JSON
	case '"':
		r.Type = gjson.String
	case 't':
		r.Type = gjson.True
	case 'f':
		r.Type = gjson.False
	case 'n':
		r.Type = gjson.Null
	default:
		r.Type = gjson.Number
	}
	return r
}

// parsedScalar is gjson.Parse(raw), for any raw, made without gjson for
// the two scalars chat reads as numbers or text on every request: a
// string without a backslash (a model's name: its text is the bytes
// between the quotes) and an integer of at most 15 digits (max_tokens,
// n: exact in a float64, as strconv.ParseFloat reads it). gjson.Parse,
// which copies a string byte by byte and parses every number with
// ParseFloat, cost a warm 1 KiB chat body about 600 instructions for its
// model and max_tokens (TestParsedScalarSameAsGJSON,
// FuzzParsedScalarSameAsGJSON).
func parsedScalar(raw string) gjson.Result {
	n := len(raw)
	if n >= 2 && raw[0] == '"' && raw[n-1] == '"' && strings.IndexByte(raw[1:n-1], '\\') < 0 && strings.IndexByte(raw[1:n-1], '"') < 0 {
		return gjson.Result{Type: gjson.String, Raw: raw, Str: raw[1 : n-1]}
	}
	if n >= 1 && n <= 15 {
		var v int64
		for i := range n {
			c := raw[i]
			if c < '0' || c > '9' {
				return gjson.Parse(raw)
			}
			v = v*10 + int64(c-'0')
		}
		return gjson.Result{Type: gjson.Number, Raw: raw, Num: float64(v)}
	}
	return gjson.Parse(raw)
}

// rawString is the text of v, a value as rawValue gives it, when it is a
// JSON string (decoded by unescapeJSON only if it holds an escape); ""
// otherwise.
func rawString(v gjson.Result) string {
	if v.Type != gjson.String || len(v.Raw) < 2 {
		return ""
	}
	return unescapeJSON(v.Raw[1 : len(v.Raw)-1])
}

// keyStop returns the index of the first quote or backslash in s from i,
// or len(s) when there is none: eight bytes at a time while eight are
// left (by the "has a zero byte" test on the word xored with each), then
// byte by byte. The lowest flagged byte of a word is always a real match
// (a borrow only flags bytes above one), so the first is found exactly.
func keyStop(s string, i int) int {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, b := w^(ones*'"'), w^(ones*'\\')
		if m := ((q-ones)&^q | (b-ones)&^b) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(s) && s[i] != '"' && s[i] != '\\' {
		i++
	}
	return i
}

// skipSpace returns the index of the first non-space byte of s from i.
// Every space byte is at most ' ', so the usual byte after a value (a
// comma, a quote, a bracket) ends the loop with one comparison.
func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at s[i] ('"').
func skipString(s string, i int) int { return skipValue(s, i) }

// skipValue returns the index just past the valid JSON value starting at
// s[i] (jsonscan.Skip, whose strings are searched with bytes.IndexByte);
// len(s) when s ends first.
func skipValue(s string, i int) int {
	if end := jsonscan.Skip(unsafe.Slice(unsafe.StringData(s), len(s)), i); end >= 0 {
		return end
	}
	return len(s)
}
