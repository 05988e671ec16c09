package weigher

import (
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// A request element that is both field-checked and counted (a chat or
// Anthropic message, a Responses input item) costs one cache lookup, not
// two: its entry is keyed in its field check's context and holds its count
// too (entry.ctx names the count context). A list counted as a whole (tool
// definitions: fields.whole) is one such element, its objects checked
// afresh, and not remembered one by one, when the list is new. The field
// check looks the
// element up once and leaves what it found in the request's elemMemo; the
// counter takes it from there. An entry under a field check's context is
// written only after the element passed that check, so finding one is the
// check's mark; a count is used only when its count context matches. Every
// write (a new mark, a new count) waits in the memo until the request is
// weighed (doc.close), then is made once per element.
//
// Chat leaves the field check of a new message to its counter
// (parseOptions.counted): the check records the message as pending, and
// the counter checks and counts it in one walk (countChecked,
// messageTally); only a message that passed gets its mark. A pending
// message is never vouched for, marked or resumed past before that.
//
// The memo also vouches for elements to the strict scan (jsonscan.Known):
// an element of a top-level array (or a whole list) whose exact bytes
// carry a field check's mark passed that scan before, under the same
// options at the same place (the mark's context holds the fields, their
// depth and the nesting limit, and a mark is written only for a body that
// passed the scan), so the scan skips it. What the memo looked up for the
// scan is kept (pre) for the field check, which then neither hashes the
// element again nor looks it up a second time.

// elemMemo is one request's record of the array elements its field check
// looked up in the count cache, in body order. Not safe for concurrent use;
// one request's weighing owns it.
type elemMemo struct {
	cache *countCache
	// lay is the layout of the memo's request (layoutOf) and pieces its
	// piece memo (piecesOf), kept with the memo between requests: each
	// from a pool of its own cost a request a pool round trip, some 120
	// instructions.
	lay    jsonscan.Layout
	pieces *memoCounter
	elems  []memoElem
	// pre are the elements looked up for the scan (Vouch), in body order;
	// next is the first the field check has not reached.
	pre  []memoElem
	next int
	// found is the index in elems of the element find found last.
	found int
	// body, top and maxDepth are the request's body, the fields of its
	// top-level object and the weigher's nesting limit, for Known.
	body     string
	top      *fields
	maxDepth int
	vouchCtx uint64 // the context of what Vouch is offered
	// deferCtx is the fields context of the elements whose field check,
	// when they are not remembered, is left to the counter
	// (parseOptions.counted; 0: none); pending counts those left
	// unchecked so far.
	deferCtx uint64
	pending  int
	// deferList are the fields of the lists (checked whole, at depth 1)
	// whose field check, when they are not remembered, is left to the
	// counter (parseOptions.countedList; nil: none): such a list is
	// pending until countChecked checks it, and is not counted in
	// pending. Its context is made only for a list not found.
	deferList *fields
	shorts    int // short elements left to the counter (maxDeferredShort)
	// guessAt and guessEnd are End's last guess (guessEnd -1: none), so
	// that Vouch knows a guess from an end Skip found; guessBudget is how
	// many more bytes wrong guesses may have Vouch hash in this request
	// (len(body) at the start: wrong guesses at most double the hashing).
	guessAt, guessEnd int
	guessBudget       int
	hints             *hintTable // the cache's, when the request began
	// offerAll: End offers the scan an element (list) it has no hint for
	// too, found with Skip and looked up by Vouch, and checked writes no
	// hint, as before jsonscan.NotOffered (for tests: the reference the
	// declining path is compared with).
	offerAll bool
	// resume is the request's side of resume points (resume.go).
	resume resumeState
	// tail holds the members Tail returns.
	tail [maxTailMembers]jsonscan.Member
	// ends are the hint hashes of the elements End did not offer, in body
	// order; endNext is the first checked has not reached. lastEnd* are
	// the last hash End made (lastEndAt -1: none), for Vouch.
	ends                    []endHash
	endNext                 int
	lastEndAt               int
	lastEndCtx, lastEndHash uint64
	// ctxs are the contexts it made last (context): kept when it is
	// pooled, so that the next request finds them.
	ctxs [ctxSlots]ctxSlot
}

// memoElem is one element the field check looked up: where it lies in the
// body, its key, the entry found or to be written.
type memoElem struct {
	p     *byte // the element's first byte, in the body
	n     int   // its length, in bytes
	k     cacheKey
	e     entry
	dirty bool // e must be written when the request is done
	dead  bool // the element failed the check (or is still being checked)
	found bool // in pre: e was found in the cache
	// pending: its field check is left to the counter (countChecked);
	// not written when the request is done unless that check passed.
	pending bool
	// hint: its end hint (hints.go) must be written when the request
	// is done, if it passed: End did not find its end.
	hint bool
	// short: shorter than minCachedBytes, recorded only to leave its
	// check to the counter (pending): never written.
	short bool
	// list: a list left pending in deferList (not counted in pending).
	list bool
	ctx  uint64
	// hh is its hint hash when End made it (0: not made; done makes it).
	hh uint64
}

// endHash is the hint hash End made for the element at at in the context
// ctx, which it did not offer the scan (jsonscan.NotOffered): the field
// check finds the element (checked), and done writes its hint under that
// hash rather than hashing its first hintPrefix bytes again (about 110
// instructions a new element).
type endHash struct {
	at  int
	ctx uint64
	h   uint64
}

// maxDeferredShort is the most short elements (under minCachedBytes) a
// request leaves to its counter to check (checked): each takes a memoElem,
// which a long element takes anyway, so that 270,000 tiny messages do not
// take 27 MB.
const maxDeferredShort = 512

// memos pools elemMemos between requests.
var memos = sync.Pool{New: func() any { return new(elemMemo) }}

// maxPooledMemo is the most elements a pooled memo keeps room for.
const maxPooledMemo = 4096

// memo returns an empty memo of c for one request whose body is body, its
// top-level object read with top, under the nesting limit maxDepth; nil
// when c is nil (caching off).
func (c *countCache) memo(body string, top *fields, maxDepth int) *elemMemo {
	if c == nil {
		return nil
	}
	m := memos.Get().(*elemMemo)
	m.cache, m.body, m.top, m.maxDepth = c, body, top, maxDepth
	m.hints = c.hints.Load()
	m.guessAt, m.guessEnd, m.guessBudget = -1, -1, len(body)
	m.lastEndAt = -1
	return m
}

// layoutOf returns the layout for the request of m: m's own, or one from
// layouts when m is nil. Give it back with putLayoutOf.
func layoutOf(m *elemMemo) *jsonscan.Layout {
	if m == nil {
		return layouts.Get().(*jsonscan.Layout)
	}
	return &m.lay
}

// putLayoutOf gives back lay, layoutOf(m)'s: to layouts unless it is m's.
func putLayoutOf(m *elemMemo, lay *jsonscan.Layout) {
	if m == nil || lay != &m.lay {
		layouts.Put(lay)
	}
}

// piecesOf returns a piece memo of b for m's request: m's own when it is
// b's, else one from b's pool, which m keeps from then on (one of another
// counter, a weigher's before a reload, is left to the collector). With
// m nil it is the pool's, to give back with b.putMemo.
func (m *elemMemo) piecesOf(b *bpeCounter) *memoCounter {
	if m == nil {
		return b.takeMemo()
	}
	if m.pieces == nil || m.pieces.bpe != b {
		m.pieces = b.takeMemo()
	}
	return m.pieces
}

// Wants implements jsonscan.Known: the lists (elem false) or elements
// (elem true) under the top-level member key that the field check reads
// with marks (checkWhole's list mark, checkElements' element mark), in
// the contexts of those marks.
func (m *elemMemo) Wants(key jsonscan.Span, elem bool) bool {
	k := m.body[key.Start:key.End]
	if len(k) < 2 || strings.IndexByte(k, '\\') >= 0 || m.top.each != nil {
		return false // an escaped key: left to the scan and the check
	}
	sub, _ := m.top.lookup(k[1 : len(k)-1])
	if sub == nil || sub.whole == elem {
		return false
	}
	if elem {
		m.vouchCtx = m.fieldsContext(sub, 2) // checkElements(elems, sub, 1, …)
	} else {
		m.vouchCtx = m.listContext(sub, 1) // checkWhole(elems, raw, sub, 1, …)
	}
	return true
}

// End implements jsonscan.KnownEnds: where the element (or whole list) at
// start ends, by the end hint (hints.go) of the last element (list) seen
// passing in the same context with the same first hintPrefix bytes; -1
// when there is none, when it would reach past the body, or when this
// request's wrong guesses have used up their budget. A guess is only a
// guess: Vouch then hashes the bytes it names and looks them up, and the
// scan steps over them only when they are an element (a list) remembered
// whole. A list stepped over so is laid out without its elements
// (jsonscan.Member.Unlaid), which its readers then find with gjson.
func (m *elemMemo) End(start int) int {
	m.guessAt, m.guessEnd = start, -1
	if len(m.body)-start < hintPrefix || m.hints == nil {
		return -1
	}
	h := m.cache.hintHash(m.vouchCtx, m.body[start:start+hintPrefix])
	m.lastEndAt, m.lastEndCtx, m.lastEndHash = start, m.vouchCtx, h
	size := m.hints.get(h)
	if size == 0 && !m.offerAll {
		// No element (list) seen passing starts so: a new one, but for a
		// hint lost to another in its slot. The scan checks it rather
		// than stepping over it to offer it to Vouch; the field check
		// looks it up (checked), and writes its hint when it passes.
		m.ends = append(m.ends, endHash{at: start, ctx: m.vouchCtx, h: h})
		return jsonscan.NotOffered
	}
	if size < minCachedBytes || size > len(m.body)-start || size > m.guessBudget {
		return -1
	}
	m.guessEnd = start + size
	return m.guessEnd
}

// Vouch implements jsonscan.Known: the body's bytes [start, end) carry
// their field check's mark. What it looked up is kept for checked.
func (m *elemMemo) Vouch(start, end int) bool {
	if end-start < minCachedBytes {
		return false
	}
	raw := m.body[start:end]
	ck := m.cache.key(m.vouchCtx, raw)
	e, found := m.cache.get(ck)
	guessed := start == m.guessAt && end == m.guessEnd
	m.guessAt, m.guessEnd = -1, -1
	if guessed && !found { // a wrong guess: the scan finds the end and asks again
		m.guessBudget -= end - start
		return false
	}
	// A hint is keyed by the hintPrefix bytes from the element's start,
	// which for a short element run on into what follows it: the same
	// bytes there again mean the same element, ending at the same place.
	hint := !guessed && start+hintPrefix <= len(m.body)
	var hh uint64
	if hint && start == m.lastEndAt && m.vouchCtx == m.lastEndCtx {
		hh = m.lastEndHash // End hashed the same bytes in the same context
	}
	m.pre = append(m.pre, memoElem{p: unsafe.StringData(raw), n: len(raw), k: ck, e: e, found: found, hint: hint, ctx: m.vouchCtx, hh: hh})
	return found
}

// endHashOf is the hint hash End made for raw (a view of m's body, asked
// for in body order) in the context ctx; 0 when it made none.
func (m *elemMemo) endHashOf(ctx uint64, raw string) uint64 {
	at := int(uintptr(unsafe.Pointer(unsafe.StringData(raw))) - uintptr(unsafe.Pointer(unsafe.StringData(m.body))))
	for ; m.endNext < len(m.ends); m.endNext++ {
		e := &m.ends[m.endNext]
		if e.at > at {
			return 0
		}
		if e.at == at && e.ctx == ctx {
			m.endNext++
			return e.h
		}
	}
	return 0
}

// hintable reports whether raw, a view of m's body, starts at least
// hintPrefix bytes before the body's end, so that an end hint can be keyed
// by its start (as Vouch decides for what it is offered).
func (m *elemMemo) hintable(raw string) bool {
	at := uintptr(unsafe.Pointer(unsafe.StringData(raw))) - uintptr(unsafe.Pointer(unsafe.StringData(m.body)))
	return at <= uintptr(len(m.body)) && int(at)+hintPrefix <= len(m.body)
}

// looked returns what Vouch looked up for raw in ctx; nil when it did not.
// The field check asks in body order, so the search goes forward.
func (m *elemMemo) looked(ctx uint64, raw string) *memoElem {
	p := uintptr(unsafe.Pointer(unsafe.StringData(raw)))
	for ; m.next < len(m.pre); m.next++ {
		el := &m.pre[m.next]
		q := uintptr(unsafe.Pointer(el.p))
		if q > p {
			return nil
		}
		if q == p && el.n == len(raw) && el.ctx == ctx {
			m.next++
			return el
		}
	}
	return nil
}

// checked returns whether raw passed check in the fields context ctx: found
// in the cache (one lookup, kept for the counter), or check's answer, its
// mark written when the request is done. Elements shorter than
// minCachedBytes are not looked up: checked, or, in the context left to
// the counter (deferCtx), left to it too, pending (not remembered: short
// is set), where the check walked a short new message once and its count
// again (the check's walk cost a warm 1 KiB load-benchmark body about 880
// instructions, the body now costs about 300 less;
// TestShortMessagesCheckedWhenCounted), up to
// maxDeferredShort a request (a body of many tiny messages records no more
// than before). With a nil m it is check().
func (m *elemMemo) checked(ctx uint64, raw string, check func() bool) bool {
	if m == nil {
		return check()
	}
	if len(raw) < minCachedBytes {
		if ctx != m.deferCtx || m.deferCtx == 0 || m.shorts >= maxDeferredShort {
			return check()
		}
		m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), pending: true, short: true})
		m.pending++
		m.shorts++
		return true
	}
	var k cacheKey
	var e entry
	var found, hint bool
	var hh uint64
	if el := m.looked(ctx, raw); el != nil {
		k, e, found, hint, hh = el.k, el.e, el.found, el.hint, el.hh
	} else {
		k = m.cache.key(ctx, raw)
		e, found = m.cache.get(k)
		// Not offered to Vouch (End had no hint for it, or it is not an
		// element the scan offers): its end is raw's, so its hint is
		// written as Vouch would have had it written.
		hint = !m.offerAll && m.hintable(raw)
		if hint {
			hh = m.endHashOf(ctx, raw)
		}
	}
	if found {
		m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, e: e, hint: hint, hh: hh})
		return true
	}
	if ctx == m.deferCtx && m.deferCtx != 0 {
		// Left to the counter, which checks it in the walk that counts it.
		m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, pending: true, hint: hint, hh: hh})
		m.pending++
		return true
	}
	if m.deferList != nil && ctx == m.listContext(m.deferList, 1) {
		// A list left to its counter (toolsCounter.countChecked).
		m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, pending: true, list: true, hint: hint, hh: hh})
		return true
	}
	// The slot is taken before check runs, so that the elements nested in
	// raw, which check records, come after it: the memo stays in body order.
	i := len(m.elems)
	m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, dead: true, hint: hint, hh: hh})
	if !check() {
		return false
	}
	m.elems[i].dead, m.elems[i].dirty = false, true
	return true
}

// find returns the element raw (a view of the same body) when the field
// check recorded it and it passed; nil otherwise.
//
// Counters ask in body order, mostly: the search goes forward from the
// element found last, and falls back to a binary search when raw lies
// before it.
func (m *elemMemo) find(raw string) *memoElem {
	p := uintptr(unsafe.Pointer(unsafe.StringData(raw)))
	if m.found < len(m.elems) && uintptr(unsafe.Pointer(m.elems[m.found].p)) <= p {
		i := m.found
		for i < len(m.elems) && uintptr(unsafe.Pointer(m.elems[i].p)) < p {
			i++
		}
		if i == len(m.elems) || uintptr(unsafe.Pointer(m.elems[i].p)) != p || m.elems[i].n != len(raw) || m.elems[i].dead {
			return nil
		}
		m.found = i
		return &m.elems[i]
	}
	i, ok := slices.BinarySearchFunc(m.elems, p, func(el memoElem, p uintptr) int {
		q := uintptr(unsafe.Pointer(el.p))
		switch {
		case q < p:
			return -1
		case q > p:
			return 1
		}
		return 0
	})
	if !ok || m.elems[i].n != len(raw) || m.elems[i].dead {
		return nil
	}
	m.found = i
	return &m.elems[i]
}

// count is [countCache.count] for an element the field check recorded: its
// count comes from the entry the check found when that entry was counted
// in ctx, and a new count is written into the element's one entry. An
// element the check did not record is counted as countCache.count does.
// With a nil m it is fn().
func (m *elemMemo) count(b *budget, ctx uint64, raw string, fn func() tally) tally {
	if m == nil || len(raw) < minCachedBytes {
		return fn()
	}
	return m.countFound(b, ctx, raw, m.find(raw), fn)
}

// countFound is count with el, what find(raw) returned.
func (m *elemMemo) countFound(b *budget, ctx uint64, raw string, el *memoElem, fn func() tally) tally {
	if el == nil || el.pending {
		// Not recorded, or its check is left to countChecked (a guard:
		// its counters call that): counted under ctx alone, not marked.
		return m.cache.count(b, ctx, raw, fn)
	}
	if el.e.counted && el.e.ctx == ctx {
		m.cache.hits.Add(1)
		return el.e.t
	}
	m.cache.misses.Add(1)
	t := fn()
	if b == nil || !b.over {
		el.e, el.dirty = entry{t: t, ctx: ctx, counted: true}, true
	}
	return t
}

// countChecked is count for an element of the array whose new elements
// the counter field-checks (parseOptions.counted): fn(check) counts raw
// and, when check, also field-checks it in the same walk (ok: it passed).
// An element left unchecked by the field check (pending) is counted with
// check, its mark and count written when the request is done if it
// passed; ok false when it failed. Any other element is counted as count
// counts it, fn(false), and is ok. With a nil m it is fn(false).
func (m *elemMemo) countChecked(b *budget, ctx uint64, raw string, fn func(check bool) (tally, bool)) (t tally, ok bool) {
	if m == nil {
		t, _ = fn(false)
		return t, true
	}
	if len(raw) < minCachedBytes {
		// A short element the field check left to this walk (checked)
		// is checked in it; it is not remembered either way. None is
		// looked for when none was left (shorts): an absent list ("")
		// took find's binary search, some 200 instructions.
		if el := m.shortPending(raw); el != nil {
			el.pending = false
			m.pending--
			if t, ok = fn(true); !ok {
				el.dead = true
			}
			return t, ok
		}
		t, _ = fn(false)
		return t, true
	}
	el := m.find(raw)
	if el == nil || !el.pending {
		return m.countFound(b, ctx, raw, el, func() tally {
			t, _ := fn(false)
			return t
		}), true
	}
	el.pending = false
	if !el.list {
		m.pending--
	}
	m.cache.misses.Add(1)
	t, ok = fn(true)
	if !ok {
		el.dead = true
		return t, false
	}
	el.dirty = true // its mark, with its count when exact
	if b == nil || !b.over {
		el.e = entry{t: t, ctx: ctx, counted: true}
	}
	return t, true
}

// shortPending is find(raw) for a short element left pending to the
// counter (checked); nil when there is none, without a search when no
// short element was left or raw is empty (an absent list).
func (m *elemMemo) shortPending(raw string) *memoElem {
	if m.shorts == 0 || raw == "" {
		return nil
	}
	if el := m.find(raw); el != nil && el.pending {
		return el
	}
	return nil
}

// unchecked reports whether an element left to the counter has not been
// checked (countChecked) yet.
func (m *elemMemo) unchecked() bool { return m != nil && m.pending > 0 }

// done writes the memo's new entries (marks and counts) and returns it to
// the pool.
func (m *elemMemo) done() {
	if m == nil {
		return
	}
	for i := range m.elems {
		el := &m.elems[i]
		if el.dead || el.pending || el.short {
			continue
		}
		if el.dirty {
			m.cache.set(el.k, el.e)
		}
		if el.hint { // vouched for or checked whole, so its end is right
			h := el.hh
			if h == 0 {
				h = m.cache.hintHash(el.k.ctx, unsafe.String(el.p, hintPrefix))
			}
			m.hints.put(h, el.n)
		}
	}
	m.cache, m.hints, m.body, m.top, m.next, m.found = nil, nil, "", nil, 0, 0
	m.deferCtx, m.pending, m.offerAll, m.shorts, m.deferList = 0, 0, false, 0, nil
	m.ends, m.endNext, m.lastEndAt = m.ends[:0], 0, -1
	m.resume.forget()
	if cap(m.lay.Members)+cap(m.lay.Elems)+cap(m.lay.Fields) > maxPooledLayout {
		m.lay = jsonscan.Layout{}
	}
	if m.pieces != nil && cap(m.pieces.unescaped) > maxPooledUnescape {
		m.pieces.unescaped = nil
	}
	if cap(m.elems) > maxPooledMemo {
		m.elems = nil
	} else {
		clear(m.elems) // drop the body pointers
		m.elems = m.elems[:0]
	}
	if cap(m.ends) > maxPooledMemo {
		m.ends = nil
	}
	if cap(m.pre) > maxPooledMemo {
		m.pre = nil
	} else {
		clear(m.pre)
		m.pre = m.pre[:0]
	}
	memos.Put(m)
}

// fieldsContext is [countCache.fieldsContext] of m's cache; zero with a nil
// m.
func (m *elemMemo) fieldsContext(f *fields, depth int) uint64 {
	if m == nil {
		return 0
	}
	return m.context(ctxFields, f, depth)
}

// listContext is [countCache.listContext] of m's cache; zero with a nil m.
func (m *elemMemo) listContext(f *fields, depth int) uint64 {
	if m == nil {
		return 0
	}
	return m.context(ctxList, f, depth)
}

// A request asks for the same few contexts (fieldsContext, listContext,
// resumeContext) every time: a chat body five or six, each a seeded hash
// of 24 to 32 bytes (about 70 instructions with its call). A memo keeps
// the last ones it made, by kind, fields, depth, nesting limit and the
// cache's seed (not the cache: a pooled memo holds no old cache), in a few
// slots (ctxSlots, direct-mapped) that live as long as it does
// (pooled: warm across requests), so that most cost a compare. A context
// is a function of those alone, so a slot found is the context made
// afresh (TestContextMemoSameAsMade).
const ctxSlots = 16

// The kinds of context a memo keeps.
const (
	ctxFields = iota // countCache.fieldsContext
	ctxList          // countCache.listContext
	ctxResume        // countCache.resumeContext (depth 0)
)

// ctxSlot is one context a memo made.
type ctxSlot struct {
	seed            uint64 // the cache's
	f               *fields
	kind            uint8
	depth, maxDepth int
	ctx             uint64
}

// context is the context of the kind for f at depth (0 for ctxResume)
// under m's cache and nesting limit, from m's slots or made (and kept).
func (m *elemMemo) context(kind uint8, f *fields, depth int) uint64 {
	s := &m.ctxs[(f.id*7+uint64(depth)*3+uint64(kind))%ctxSlots]
	if s.f == f && s.seed == m.cache.seed && s.kind == kind && s.depth == depth && s.maxDepth == m.maxDepth {
		return s.ctx
	}
	var ctx uint64
	switch kind {
	case ctxFields:
		ctx = m.cache.fieldsContext(f, depth, m.maxDepth)
	case ctxList:
		ctx = m.cache.listContext(f, depth, m.maxDepth)
	default:
		ctx = m.cache.resumeContext(f, m.maxDepth)
	}
	*s = ctxSlot{seed: m.cache.seed, f: f, kind: kind, depth: depth, maxDepth: m.maxDepth, ctx: ctx}
	return ctx
}
