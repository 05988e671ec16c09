package weigher

import (
	"slices"
	"sync"
	"unsafe"
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

// elemMemo is one request's record of the array elements its field check
// looked up in the count cache, in body order. Not safe for concurrent use;
// one request's weighing owns it.
type elemMemo struct {
	cache *countCache
	elems []memoElem
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
}

// memos pools elemMemos between requests.
var memos = sync.Pool{New: func() any { return new(elemMemo) }}

// maxPooledMemo is the most elements a pooled memo keeps room for.
const maxPooledMemo = 4096

// memo returns an empty memo of c for one request; nil when c is nil
// (caching off).
func (c *countCache) memo() *elemMemo {
	if c == nil {
		return nil
	}
	m := memos.Get().(*elemMemo)
	m.cache = c
	return m
}

// checked returns whether raw passed check in the fields context ctx: found
// in the cache (one lookup, kept for the counter), or check's answer, its
// mark written when the request is done. Elements shorter than
// minCachedBytes are always checked. With a nil m it is check().
func (m *elemMemo) checked(ctx uint64, raw string, check func() bool) bool {
	if m == nil || len(raw) < minCachedBytes {
		return check()
	}
	k := m.cache.key(ctx, raw)
	if e, ok := m.cache.c.GetIfPresent(k); ok {
		m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, e: e})
		return true
	}
	// The slot is taken before check runs, so that the elements nested in
	// raw, which check records, come after it: the memo stays in body order.
	i := len(m.elems)
	m.elems = append(m.elems, memoElem{p: unsafe.StringData(raw), n: len(raw), k: k, dead: true})
	if !check() {
		return false
	}
	m.elems[i].dead, m.elems[i].dirty = false, true
	return true
}

// find returns the element raw (a view of the same body) when the field
// check recorded it and it passed; nil otherwise.
func (m *elemMemo) find(raw string) *memoElem {
	p := uintptr(unsafe.Pointer(unsafe.StringData(raw)))
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
	el := m.find(raw)
	if el == nil {
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

// done writes the memo's new entries (marks and counts) and returns it to
// the pool.
func (m *elemMemo) done() {
	if m == nil {
		return
	}
	for i := range m.elems {
		if el := &m.elems[i]; el.dirty && !el.dead {
			m.cache.c.Set(el.k, el.e)
		}
	}
	m.cache = nil
	if cap(m.elems) > maxPooledMemo {
		m.elems = nil
	} else {
		clear(m.elems) // drop the body pointers
		m.elems = m.elems[:0]
	}
	memos.Put(m)
}

// fieldsContext is [countCache.fieldsContext] of m's cache; zero with a nil
// m.
func (m *elemMemo) fieldsContext(f *fields, depth int) uint64 {
	if m == nil {
		return 0
	}
	return m.cache.fieldsContext(f, depth)
}

// listContext is [countCache.listContext] of m's cache; zero with a nil m.
func (m *elemMemo) listContext(f *fields, depth int) uint64 {
	if m == nil {
		return 0
	}
	return m.cache.listContext(f, depth)
}
