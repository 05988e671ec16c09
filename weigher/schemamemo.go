package weigher

import "github.com/llmguard/llmguard/internal/bytememo"

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
// The memo (a bytememo.Memo) keeps the object's bytes, so it is found
// only for the same bytes: an object found at s[x] is the one
// remembered, as a JSON object ends where its bytes close it, and its
// count (its properties' and the members the rule does not read,
// toolsCounter.schemaObject) is a function of its bytes and the counter's
// vocabulary alone. The field check the walk makes (toolCheck) depends on
// the fields the object is read with too: a slot keeps the fields and
// depth it was checked with and the verdict, and is used by a walk that
// checks only when they are the same. Objects that share a set (picked by
// a hash of their first 64 bytes, which schemas often share:
// `{"type":"object","properties":{"query":{"type":"string"`) replace each
// other in turn, which costs walks, never a wrong count
// (TestSchemaMemoSameCounts, FuzzSchemaMemoSameCounts). An object shorter
// than 64 bytes (one or two bare properties, a walk of under 2,000
// instructions) is not kept: its set could not be found before its end
// is.
//
// Part of a memoCounter (one vocabulary, one goroutine at a time). Size:
// 32 slots of 64 bytes to 4 KiB (an MCP tool's schema of several
// properties; 128 KiB held at most, about 8 KiB for a dozen typical
// tools). The zero value is an empty memo.
type schemaMemo struct {
	m bytememo.Memo[schemaSlot]
}

// schemaSlot is what a remembered parameters object counted, and the
// check it was counted under.
type schemaSlot struct {
	f      *fields // the fields its check read it with; nil: not checked
	fd     int     // the walkFields depth of that check
	failed bool    // that check failed
	tokens int64
}

// find looks for a remembered object at the start of s (the rest of a
// checked document from a parameters object's '{'), checked with f at
// depth fd when check is set. It returns its tokens, its length and,
// when check is set, whether its check failed; ok is false when no slot
// holds it (with that check).
func (m *schemaMemo) find(s string, f *fields, fd int, check bool) (tokens int64, n int, failed, ok bool) {
	sl, l := m.m.FindString(s)
	if sl == nil || check && (sl.f != f || sl.fd != fd) {
		return 0, 0, false, false
	}
	return sl.tokens, l, check && sl.failed, true
}

// keep remembers that the object obj counts tokens, checked with f at
// depth fd with the verdict failed when check is set (replacing what its
// slot held). An object shorter than 64 bytes or over 4 KiB is not kept.
func (m *schemaMemo) keep(obj string, f *fields, fd int, check, failed bool, tokens int64) {
	sl := m.m.KeepString(obj)
	if sl == nil {
		return
	}
	*sl = schemaSlot{tokens: tokens}
	if check {
		sl.f, sl.fd, sl.failed = f, fd, failed
	}
}
