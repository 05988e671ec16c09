package weigher

import "github.com/zeebo/xxh3"

// schemaMemo remembers the tokens of recently counted function parameters
// objects (a tool's JSON schema: `{"type":"object","properties":{…}}`),
// by their exact bytes. An agent sends the same tools with every request,
// and a list whose descriptions change (a date, a nonce, a user's name)
// is new to the count cache, which keys on the whole list: its
// parameters objects are not, and their walk (every property's key,
// type, description and enum joined and counted, every key looked up
// for the field check) was some 6,000 instructions a tool of a cold
// 1 KiB chat body's 25,000 for its two tools (perf21).
//
// A slot holds the object's bytes, so it is found only for the same
// bytes: an object found at s[x] is the one remembered, as a JSON object
// ends where its bytes close it, and its count (its properties' and the
// members the rule does not read, toolsCounter.schemaObject) is a
// function of its bytes and the counter's vocabulary alone. The field
// check the walk makes (toolCheck) depends on the fields the object is
// read with too: a slot keeps the fields and depth it was checked with
// and the verdict, and is used by a walk that checks only when they are
// the same. Set-associative (schemaSets sets of schemaWays slots, picked
// by a hash of the object's first schemaHashBytes bytes, which schemas
// often share: `{"type":"object","properties":{"query":{"type":"string"`):
// objects that share a set replace each other in turn, which costs
// walks, never a wrong count (TestSchemaMemoSameCounts,
// FuzzSchemaMemoSameCounts). An object shorter than schemaHashBytes (one
// or two bare properties, a walk of under 2,000 instructions) is not
// kept: its set could not be found before its end is.
//
// Part of a memoCounter (one vocabulary, one goroutine at a time). Size:
// schemaSets × schemaWays slots of at most maxSchemaMemoBytes each. The
// zero value is an empty memo.
type schemaMemo struct {
	sets [schemaSets][schemaWays]schemaSlot
	next [schemaSets]uint8 // the way the next new object of a set replaces
}

// The memo's shape: 8 sets of 4 ways, objects of 64 bytes to 4 KiB (an
// MCP tool's schema of several properties; 128 KiB held at most, about
// 8 KiB for a dozen typical tools), the set picked by the first 64 bytes.
const (
	schemaSets         = 8
	schemaWays         = 4
	maxSchemaMemoBytes = 4 << 10
	schemaHashBytes    = 64
)

// schemaSlot is one remembered parameters object.
type schemaSlot struct {
	text   []byte  // the object's JSON; empty: an empty slot
	f      *fields // the fields its check read it with; nil: not checked
	fd     int     // the walkFields depth of that check
	failed bool    // that check failed
	tokens int64
}

// set is the set of the object that starts s (at least schemaHashBytes).
func (m *schemaMemo) set(s string) int {
	return int(xxh3.HashString(s[:schemaHashBytes]) & (schemaSets - 1))
}

// find looks for a remembered object at the start of s (the rest of a
// checked document from a parameters object's '{'), checked with f at
// depth fd when check is set. It returns its tokens, its length and,
// when check is set, whether its check failed; ok is false when no slot
// holds it (with that check).
func (m *schemaMemo) find(s string, f *fields, fd int, check bool) (tokens int64, n int, failed, ok bool) {
	if len(s) < schemaHashBytes {
		return 0, 0, false, false // no object kept is this short
	}
	set := &m.sets[m.set(s)]
	for i := range set {
		sl := &set[i]
		if l := len(sl.text); l == 0 || l > len(s) || string(sl.text) != s[:l] {
			continue
		}
		if check && (sl.f != f || sl.fd != fd) {
			continue
		}
		return sl.tokens, len(sl.text), check && sl.failed, true
	}
	return 0, 0, false, false
}

// keep remembers that the object obj counts tokens, checked with f at
// depth fd with the verdict failed when check is set. An object shorter
// than schemaHashBytes or over maxSchemaMemoBytes is not kept.
func (m *schemaMemo) keep(obj string, f *fields, fd int, check, failed bool, tokens int64) {
	if len(obj) < schemaHashBytes || len(obj) > maxSchemaMemoBytes {
		return
	}
	k := m.set(obj)
	set := &m.sets[k]
	w := -1
	for i := range set {
		if string(set[i].text) == obj {
			w = i // the same object, kept with another check: replaced
			break
		}
	}
	if w < 0 {
		w = int(m.next[k])
		m.next[k] = uint8((w + 1) % schemaWays)
	}
	sl := &set[w]
	sl.text = append(sl.text[:0], obj...)
	sl.f, sl.fd, sl.failed, sl.tokens = nil, 0, false, tokens
	if check {
		sl.f, sl.fd, sl.failed = f, fd, failed
	}
}
