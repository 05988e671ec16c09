// Package jsonscan checks a JSON document in one flat pass before any
// recursive parser sees it.
//
// In the request flow (DESIGN.md §1, steps 3 and 7) every JSON document
// llmguard reads — a request body before it is weighed, an upstream JSON
// answer or SSE event before its usage is read, the price file — goes through
// [Check] first: strict RFC 8259 syntax, nesting bounded by a depth limit,
// optionally no object naming a key twice (or two keys that differ only in
// case), and optionally the UTF-8 of RFC 8259 §8.1. The scan is a loop over the
// bytes with an explicit stack of one bit per open array or object, so it
// cannot overflow the goroutine stack and costs O(len) time whatever the
// shape; only the gjson or encoding/json pass that follows builds values.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting limit when [Options.MaxDepth] is 0: at most
// 128 arrays and objects open at once, as the duplicate-key walk allowed
// before this package existed. Real API bodies nest under 20 levels (a
// JSON schema for structured output a few dozen at most).
const DefaultMaxDepth = 128

// Reason says why a document was refused. The zero value is [OK].
type Reason uint8

const (
	// OK: the document is valid and within the limits.
	OK Reason = iota
	// TooDeep: more than [Options.MaxDepth] arrays and objects are open at
	// once.
	TooDeep
	// Syntax: a byte that RFC 8259's grammar does not allow where it stands
	// (a bad literal, number, escape, a control character in a string, a
	// missing comma or colon, a byte-order mark…).
	Syntax
	// Truncated: the input ends inside a value, or holds no value at all.
	Truncated
	// Trailing: something other than whitespace follows the top-level value.
	Trailing
	// DuplicateKey: an object names the same key twice, compared after
	// unescaping (only checked with [Options.DuplicateKeys]).
	DuplicateKey
	// ByteOrderMark: the input starts with a UTF-8 byte-order mark (EF BB
	// BF), which RFC 8259 §8.1 forbids in JSON exchanged between systems
	// (only reported with [Options.UTF8]; otherwise it is a Syntax error).
	ByteOrderMark
	// NotUTF8: the input is not UTF-8 (RFC 8259 §8.1): a byte sequence that
	// is not valid UTF-8 (RFC 3629), or a NUL byte, which no JSON text holds
	// raw and which marks UTF-16 and UTF-32 text (only reported with
	// [Options.UTF8]).
	NotUTF8
	// CaseVariantKey: two keys of one object are the same once case is
	// folded ([FoldKey]) but not as written, as "max_tokens" and
	// "MAX_TOKENS" (only checked with [Options.FoldCase]).
	CaseVariantKey
)

var reasonNames = [...]string{"ok", "too_deep", "syntax", "truncated", "trailing", "duplicate_key",
	"byte_order_mark", "not_utf8", "case_variant_key"}

// String is the reason's snake_case name ("too_deep", "syntax"…).
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Error is a refused document: the reason and the byte offset at which the
// scan stopped. [Check] returns it as *Error.
type Error struct {
	// Reason is why the document was refused (never OK).
	Reason Reason
	// Offset is the byte offset in the input where the problem was found:
	// the bracket that went too deep, the offending byte, the input's length
	// for Truncated, the first trailing byte, the opening quote of the
	// repeated key's second occurrence.
	Offset int
	// MaxDepth is the nesting limit in effect.
	MaxDepth int
}

func (e *Error) Error() string {
	switch e.Reason {
	case TooDeep:
		return fmt.Sprintf("jsonscan: nested deeper than %d levels at offset %d", e.MaxDepth, e.Offset)
	case Truncated:
		return fmt.Sprintf("jsonscan: unexpected end of JSON at offset %d", e.Offset)
	case Trailing:
		return fmt.Sprintf("jsonscan: data after the JSON value at offset %d", e.Offset)
	case DuplicateKey:
		return fmt.Sprintf("jsonscan: object names a key twice (offset %d)", e.Offset)
	case ByteOrderMark:
		return "jsonscan: byte-order mark before the JSON text"
	case NotUTF8:
		return fmt.Sprintf("jsonscan: not UTF-8 at offset %d", e.Offset)
	case CaseVariantKey:
		return fmt.Sprintf("jsonscan: object has two keys that differ only in case (offset %d)", e.Offset)
	}
	return fmt.Sprintf("jsonscan: syntax error at offset %d", e.Offset)
}

// ReasonOf is err's Reason when err is an *Error, OK when err is nil, and
// Syntax for any other error.
func ReasonOf(err error) Reason {
	if err == nil {
		return OK
	}
	if e, ok := err.(*Error); ok {
		return e.Reason
	}
	return Syntax
}

// Options configures [Check]. The zero value checks syntax and a depth of
// [DefaultMaxDepth].
type Options struct {
	// MaxDepth is the most arrays and objects that may be open at once
	// ("[]" is depth 1, a scalar depth 0); 0 means [DefaultMaxDepth]. A
	// negative value means no limit (the bit stack then grows with the
	// document, one bit per level).
	MaxDepth int
	// DuplicateKeys also refuses an object that names a key twice after
	// unescaping ("max_tokens" and "max\u005ftokens" are the same key; an
	// unpaired surrogate escape reads as U+FFFD): RFC 8259 §4 leaves such
	// objects' meaning to each parser. A key among an object's first 16 is
	// compared with the earlier ones as written (unescaped only when one
	// holds an escape, and with FoldCase folded only when one is not its
	// own fold; 40 bytes each while the object is open); later keys are
	// hashed (8 bytes each) and an object holding more than 16 keys has all
	// its keys' hashes sorted when it closes.
	DuplicateKeys bool
	// FoldCase also refuses an object holding two keys that are the same
	// once case is folded ([FoldKey]) but differ as written, with reason
	// CaseVariantKey: a decoder that matches keys to fields ignoring case
	// (Go's encoding/json) reads one of them where a case-sensitive one
	// (Python's json, gjson) reads the other. It implies DuplicateKeys.
	FoldCase bool
	// Layout, when not nil, is reset and filled with where the members of
	// the top-level object and the elements of its arrays lie, so that a
	// reader finds them without scanning the document again. It is filled
	// only as far as the scan went: read it only when Check returns nil.
	Layout *Layout
	// Known, when not nil (and Layout is set), is offered the values it
	// may skip: see [Known]. Values it vouches for are not checked again.
	Known Known
	// UTF8 refuses a document that is not UTF-8 (RFC 8259 §8.1): a leading
	// byte-order mark (ByteOrderMark), bytes that are not valid UTF-8
	// inside or outside strings, or a NUL byte (NotUTF8), rather than
	// calling them Syntax errors or (inside strings) letting them pass.
	// Lenient decoders read such input anyway (Python's json.loads decodes
	// UTF-16, UTF-32 and a byte-order mark; Go's encoding/json turns invalid
	// UTF-8 into U+FFFD), so a reader that must agree with them refuses it.
	UTF8 bool
	// Fields (with Layout) also records in Layout.Fields the members of
	// the object elements of the top-level object's arrays that Check
	// scans, so that a reader of a new element (the weigher's new chat
	// message) steps through its members without scanning it again.
	Fields bool
	// Resume, when positive, starts the scan at b[Resume:] in the state a
	// scan of b[:Resume] leaves just after an element (at depth 2, and not
	// a number, which the bytes after it could lengthen) of the
	// array value of the last member of Layout, which the caller fills
	// with the top-level members up to that one as Check recorded them
	// (the last one's Key and Value.Start; its elements before Resume are
	// not recorded: Layout.Elems starts empty). The caller vouches that
	// b[:Resume] is, byte for byte, the start of a document that passed
	// Check under the same options and left that state there (the
	// weigher's resume points: a seeded 128-bit hash of the prefix it
	// remembers); Check then checks only what follows, finding there every
	// problem a full scan finds (the keys of the members given join the
	// duplicate-key check when the array closes, unless Tail vouches
	// for what follows it). Without a Layout, or with one
	// that does not fit b (no such member, a value that is not an array),
	// the whole of b is scanned as if Resume were 0, and Layout.Resumed
	// says so.
	Resume int
	// Tail, when not nil, is offered the bytes after the resumed array's
	// value in a scan resumed at Resume: see [KnownTail].
	Tail KnownTail
	// Reuse names members (keys as written, right before their value:
	// `"parameters":{`, in objects at depth 3 or more) whose object values
	// the scanner remembers once checked, and steps over when a later
	// check meets the same bytes there under the same options: a tool's
	// "parameters" or "input_schema", sent unchanged with every request.
	// Only with DuplicateKeys (or FoldCase); the scanner is the one kept
	// with Layout, or a pooled one. The verdict is the one a full scan
	// gives (see reuse.go).
	Reuse []string
}

// Known vouches for parts of a document a caller has seen checked before
// (the weigher: request elements whose exact bytes it remembers having
// passed Check with the same options, at the same place). Check offers it
// the array value of a top-level member (a list: elem false) and the
// object elements of such an array (elem true) under the keys it Wants,
// found without checking them ([Skip]): a value it vouches for is recorded
// in the layout and not checked. A Known that vouches for bytes that would
// not pass makes Check accept them: it must vouch only for bytes it has
// seen pass, in full.
type Known interface {
	// Wants reports whether the member whose key is key (as Layout
	// records it) has its list (elem false) or its elements (elem true)
	// offered to Vouch. It is asked at most once per member and elem.
	Wants(key Span, elem bool) bool
	// Vouch reports whether b[start:end], a list or element of the member
	// Wants last accepted, passed before: Check then goes on from end.
	Vouch(start, end int) bool
}

// KnownEnds is a [Known] that may also guess where an object element it
// is offered ends, so that Check need not find the end with [Skip] (a
// pass over the element's bytes, the larger part of stepping over a
// remembered one). Check offers Vouch the guessed bytes b[start:end] only
// when they open with '{' and close with '}', and Vouch must accept only
// bytes it has seen pass as one element (as Known requires), never a run
// of elements and what lies between them (`{}],"k":[{}`): one object that
// fills b[start:end] ends where Skip would have found its end. A wrong guess (Vouch refuses it)
// costs the time Vouch takes; Check then finds the end with Skip and
// offers the element again.
type KnownEnds interface {
	Known
	// End returns where the object element starting at b[start], of the
	// member Wants last accepted for its elements, ends (exclusive), or
	// where the list (array value) starting there of the member Wants
	// last accepted for its list does, when it remembers one starting
	// with the same bytes; -1 when not. A list vouched for at its guessed
	// end is recorded Unlaid (its elements not found). It may instead
	// return [NotOffered]: Check then checks the value as if Wants had
	// declined it, without finding its end or offering it to Vouch.
	End(start int) int
}

// KnownTail vouches for the rest of a resumed document ([Options.Resume],
// [Options.Tail]) after the array it resumed in: the bytes b[at:] after
// that array's value, which close the top-level object
// (`,"tools":[…],"max_tokens":256}` and any whitespace after it).
type KnownTail interface {
	// Tail returns the members of the top-level object that b[at:]
	// holds (Key and Value relative to at; Unlaid set for a list, whose
	// elements are then not recorded; First and Last ignored), when b[at:]
	// is, byte for byte, what followed the resumed array's value in a
	// document that passed Check under the same options and whose bytes
	// before that array's value are b's (the members given with
	// Options.Resume, the array's key included, are that document's);
	// nil when it does not remember such bytes. Check then records them
	// and stops, checking nothing: bytes that passed once after that
	// array, from the state it leaves (the top-level object open, a
	// member's value just ended), pass again, and the top-level object's
	// keys are that document's, none repeated (the duplicate-key check).
	// It is asked at most once per Check, at the end of the resumed
	// array's value.
	Tail(at int) []Member
}

// NotOffered is what [KnownEnds.End] returns for a value it expects Vouch
// to refuse (the weigher: one whose start it has never seen pass): Check
// checks it then, as it would check a value Known does not want, rather
// than first stepping over it with [Skip] only to offer it to Vouch. Any
// value may be declined so; declining one Vouch would have accepted
// costs only the time of checking it.
const NotOffered = -2

// Span is the bytes b[Start:End] of the checked document.
type Span struct{ Start, End int32 }

// Member is one member of the top-level object: its key (quotes included,
// as written: escapes are not decoded) and its value, without the
// whitespace around either. When the value is an array, its elements are
// Layout.Elems[First:Last].
type Member struct {
	Key, Value  Span
	First, Last int32
	// Unlaid: the value is an array whose elements are not recorded
	// (First == Last): Known vouched for it whole at the end KnownEnds
	// guessed, without finding its elements. Read them from Value.
	Unlaid bool
}

// Layout is where a document's top-level members and the elements of its
// top-level arrays lie ([Options.Layout]). It holds nothing when the
// document is not an object. Reuse one across checks to allocate nothing:
// Check reslices its slices to zero length first.
//
// A layout holds at most one member or element per 16 bytes of document
// (and none for a document of 2 GiB or more): past that, Dropped is set and
// the layout is incomplete, so that its memory stays within the document's
// size; a reader then finds its way without it.
type Layout struct {
	Members []Member
	Elems   []Span
	Dropped bool
	// Resumed: the check started at Options.Resume (false: at the start,
	// the layout given not fitting the document, or no Resume asked).
	Resumed bool
	// Tail is how many of the last Members Options.Tail vouched for
	// (KnownTail): found without scanning the bytes that hold them;
	// 0 when none.
	Tail int
	// Fields (with Options.Fields) are the members of the object elements
	// of the top-level arrays that the check scanned (not those Known
	// vouched for), in document order: each one's key (quotes included,
	// as written) and value, without the whitespace around either. The
	// members of the element whose span is e are the Fields whose
	// Key.Start lies in e (FieldsOf). When FieldsDropped, some are missing.
	Fields []Member
	// FieldsDropped: Fields is incomplete, as the layout is when Dropped
	// (at most one field per 16 bytes of document, plus 16, and at most
	// MaxFields in all).
	FieldsDropped bool
	// sc is the scanner of the checks given this layout, kept with it
	// (nil until its first check): a layout belongs to one check at a
	// time, and a scanner from the pool cost a check a round trip of
	// about 120 instructions. A Layout copied by value shares it: copy
	// only a zero Layout.
	sc *scanner
}

// MaxFields is the most members Layout.Fields records (28 bytes each: at
// most 112 KiB). Fields are a shortcut for the walk that reads new
// elements, worth having for the few a request adds; a body of many small
// new objects (200,000 one-member messages in 8 MiB) would otherwise grow
// the slice by append's 1.25× steps to about 5× its final size, some
// 10 bytes allocated per byte of body, and gain little. Past it
// FieldsDropped is set and the reader walks the elements itself.
const MaxFields = 4096

// FieldsOf returns the members of the object element whose span is e as
// Fields records them, in order; ok is false when Fields cannot say (an
// element the check did not scan, a layout incomplete or not filled with
// Options.Fields, an element with no member). Time O(log len(Fields)).
func (l *Layout) FieldsOf(e Span) (fields []Member, ok bool) {
	if l.Dropped || l.FieldsDropped {
		return nil, false
	}
	f := l.Fields
	lo, hi := 0, len(f)
	for lo < hi { // the first field at or after e.Start
		m := int(uint(lo+hi) >> 1)
		if f[m].Key.Start < e.Start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	end := lo
	for end < len(f) && f[end].Key.Start < e.End {
		end++
	}
	return f[lo:end], end > lo
}

// room reports whether the layout of a document of n bytes may take one
// more entry, and marks it Dropped when not.
func (l *Layout) room(n int) bool {
	if l.Dropped {
		return false
	}
	if n >= 1<<31-1 || len(l.Members)+len(l.Elems) >= n/16+16 {
		l.Dropped = true
		return false
	}
	return true
}

// Check scans b as one JSON text (RFC 8259: a value with optional
// whitespace around it). It returns nil when b is valid and within opt's
// limits, else an *Error with the reason and offset. Without opt.UTF8,
// syntax is checked byte-wise as encoding/json.Valid does: bytes ≥ 0x80
// inside strings are not checked for UTF-8 validity. Time is O(len(b)) (plus O(k log k) for an
// object of k > 16 keys when opt.DuplicateKeys); memory is one bit per
// nesting level (no allocation up to 256 levels: scanners are pooled, or
// kept with opt.Layout from its first check on) plus the duplicate-key
// bookkeeping. With opt.Known, values it vouches for are skipped unchecked
// (see [Known]). It never panics and never keeps b.
func Check(b []byte, opt Options) error { return check(b, opt, false) }

// check is Check; hashed compares the keys of every object by their hashes
// as they come (as FoldCase did for every key until its first smallObject
// were compared as written too), not only those past an object's first
// smallObject: the reference the key comparison of small objects is tested
// against, with and without FoldCase.
func check(b []byte, opt Options, hashed bool) error {
	max := opt.MaxDepth
	if max == 0 {
		max = DefaultMaxDepth
	}
	var s *scanner
	if opt.Layout != nil && opt.Layout.sc != nil {
		s = opt.Layout.sc
	} else {
		s = pool.Get().(*scanner)
		if opt.Layout != nil {
			opt.Layout.sc = s
		}
	}
	s.b, s.max, s.dup, s.fold, s.utf8 = b, max, opt.DuplicateKeys || opt.FoldCase, opt.FoldCase, opt.UTF8
	s.hashed = hashed
	s.lay = opt.Layout
	s.known, s.ends, s.tail, s.wants, s.resume, s.resumedOpen = nil, nil, nil, 0, 0, false
	s.fields, s.inField = opt.Fields && opt.Layout != nil, false
	s.reuse, s.rec = nil, -1
	if s.dup && !hashed {
		s.reuse = opt.Reuse
	}
	if s.lay != nil {
		s.known = opt.Known
		s.ends, _ = opt.Known.(KnownEnds)
		s.lay.Tail = 0
		if opt.Resume > 0 && s.resumable(opt.Resume) {
			s.resume = opt.Resume
			s.tail = opt.Tail
			s.lay.Elems, s.lay.Dropped, s.lay.Resumed = s.lay.Elems[:0], false, true
			s.lay.Fields, s.lay.FieldsDropped = s.lay.Fields[:0], false
		} else {
			s.lay.Members, s.lay.Elems, s.lay.Dropped, s.lay.Resumed = s.lay.Members[:0], s.lay.Elems[:0], false, false
			s.lay.Fields, s.lay.FieldsDropped = s.lay.Fields[:0], false
		}
	}
	s.stop, s.high = &str, 0
	if s.utf8 {
		s.stop, s.high = &strUTF8, 0x8080808080808080
	}
	r, off := s.scan()
	if s.utf8 && r == Syntax {
		r, off = encodingReason(b, off)
	}
	s.release()
	if r != OK {
		return &Error{Reason: r, Offset: off, MaxDepth: max}
	}
	return nil
}

// pool keeps scanners, so that a Check allocates nothing but its *Error.
var pool = sync.Pool{New: func() any {
	return &scanner{stack: make([]uint64, 4), keys: make([]uint64, 0, 64), spans: make([]keySpan, 0, 64), objs: make([]object, 0, 16)}
}}

// keepKeys is the most key slots a pooled scanner keeps between checks.
const keepKeys = 4096

// release returns s to the pool, or leaves it with the layout that keeps
// it (Layout.sc), without the input and without buffers a huge document
// made it grow (those go to the garbage collector).
func (s *scanner) release() {
	kept := s.lay != nil && s.lay.sc == s
	s.b, s.lay, s.known, s.ends, s.tail, s.reuse = nil, nil, nil, nil, nil, nil
	if len(s.stack) > 4 {
		s.stack = make([]uint64, 4)
	}
	if cap(s.keys) > keepKeys {
		s.keys = make([]uint64, 0, 64)
	}
	if cap(s.spans) > keepKeys {
		s.spans = make([]keySpan, 0, 64)
	}
	if cap(s.objs) > keepKeys {
		s.objs = make([]object, 0, 16)
	}
	s.keys, s.spans, s.objs = s.keys[:0], s.spans[:0], s.objs[:0]
	for i := range s.scratch {
		if cap(s.scratch[i]) > keepKeys {
			s.scratch[i] = nil
		}
	}
	if !kept {
		pool.Put(s)
	}
}

// Valid reports whether b is a valid JSON text nested at most maxDepth
// levels (0: DefaultMaxDepth), like Check(b, Options{MaxDepth: maxDepth})
// == nil.
func Valid(b []byte, maxDepth int) bool {
	return Check(b, Options{MaxDepth: maxDepth}) == nil
}

// smallObject is the number of keys an object may hold before its keys are
// compared by sorting at its end rather than one by one as they come.
const smallObject = 16

// seed hashes keys; it is chosen once per process so that nobody can craft
// keys whose hashes collide.
var seed = maphash.MakeSeed()

// scanner is the state of one Check.
type scanner struct {
	b    []byte
	max  int
	dup  bool
	fold bool // keys are compared case-folded too (Options.FoldCase)
	utf8 bool // strings must be valid UTF-8 (Options.UTF8)
	// stop is the string table in use: str, or strUTF8 when utf8.
	stop *[256]uint8
	// high is stopMask's high for stop: 0x80 in each byte with utf8, else 0.
	high uint64
	// stack holds one bit per open container, bit d for depth d+1: 1 for an
	// object, 0 for an array.
	stack []uint64
	// objs are the open objects, innermost last.
	objs []object
	// hashed: keys are compared by their hashes as they come (the
	// reference of the tests: check), rather than as written (see addKey).
	hashed bool
	// keys are the hashes of the unescaped (folded) keys of the open
	// objects, innermost last, when hashed; else of their keys past the
	// first smallObject of each.
	keys []uint64
	// spans are where the first smallObject keys of each open object lie,
	// innermost last, when not hashed.
	spans   []keySpan
	scratch [4][]byte
	// lay, when not nil, records the top-level layout (Options.Layout).
	lay *Layout
	// known, when not nil, vouches for values (Options.Known; only with
	// lay); wants holds its Wants answers for the current member: bit 0
	// asked, bit 1 the list wanted, bit 2 asked for elements, bit 3 the
	// elements wanted.
	known Known
	wants uint8
	// ends is known as a KnownEnds, when it is one.
	ends KnownEnds
	// tail is Options.Tail in a resumed scan, until it is asked (at the
	// end of the resumed array's value).
	tail KnownTail
	// resume is where the scan starts (Options.Resume; 0: at the start).
	resume int
	// resumedOpen: the array a resumed scan started in is still open;
	// the keys of the members given (Options.Resume) are added to the
	// duplicate-key check when it closes, unless its tail is vouched
	// for (resumedEnd).
	resumedOpen bool
	// fields: record Layout.Fields (Options.Fields, with a layout);
	// inField: the last one's value is being scanned, its end not yet
	// recorded.
	fields, inField bool
	// reuse is Options.Reuse (nil without DuplicateKeys); rec is where
	// the object being remembered opened (-1: none), found again by its
	// object record when it closes; memo is the memo (reuse.go).
	reuse []string
	rec   int
	memo  objectMemo
}

// resumable reports whether the layout fits a scan resumed at at in b
// (Options.Resume): members whose spans lie before at, the last one's
// value an array opened before at, and an object opening b.
func (s *scanner) resumable(at int) bool {
	ms := s.lay.Members
	if s.max > 0 && s.max < 2 || at > len(s.b) || !closed(s.b[at-1]) || len(ms) == 0 || s.skipSpace(0) >= at || s.b[s.skipSpace(0)] != '{' {
		return false
	}
	for _, m := range ms {
		if m.Key.Start < 0 || m.Key.End > int32(at) || m.Key.End-m.Key.Start < 2 || s.b[m.Key.Start] != '"' {
			return false
		}
	}
	v := ms[len(ms)-1].Value.Start
	return v >= 0 && v < int32(at) && s.b[v] == '['
}

// closed reports whether a value whose last byte is c cannot go on: an
// object, array, string or literal (true, false, null). A number can
// ("0" goes on as "0.5"), so no scan resumes after one.
func closed(c byte) bool { return c == '}' || c == ']' || c == '"' || c == 'e' || c == 'l' }

// resumeState sets s up as a scan of b[:s.resume] leaves it (see
// Options.Resume): the top-level object and the array open. The keys of
// the members given are not added to the duplicate-key check yet: only
// the top-level object's later keys can repeat them (the prefix passed,
// and the array's elements are objects of their own), and when the
// array closes either the tail after it is vouched for, keys included
// (KnownTail), or they are added then, before any later key
// (resumedEnd). Adding them here cost a warm 1 KiB chat body about 400
// instructions, for keys its vouched tail never compared.
func (s *scanner) resumeState() {
	root := s.skipSpace(0)
	s.push(1, root, true)
	s.resumedOpen = true // the members' keys: when the array closes (resumedEnd)
	m := &s.lay.Members[len(s.lay.Members)-1]
	m.First, m.Last = 0, 0
	s.push(2, int(m.Value.Start), false)
}

// resumedEnd is called when the array a resumed scan started in closes
// at i (depth back to 1). It offers s.tail the bytes after it
// (vouchTail); when they are vouched for, the scan is done, with its
// result. Otherwise the keys of the members given (Options.Resume) are
// added to the duplicate-key check, in order, as a scan from the start
// would have added them before reaching any later key, and the scan
// goes on at i (not done). Those keys repeat none another (they passed
// in the prefix); r is not OK only when they do, for a caller that
// vouched for a prefix that never passed.
func (s *scanner) resumedEnd(i int) (done bool, r Reason, off int) {
	s.resumedOpen = false
	if s.tail != nil {
		if done, r, off := s.vouchTail(i); done {
			return true, r, off
		}
	}
	if !s.dup {
		return false, OK, 0
	}
	for _, m := range s.lay.Members {
		key := s.b[m.Key.Start:m.Key.End]
		if r := s.addKey(int(m.Key.Start), int(m.Key.End), bytes.IndexByte(key, '\\') >= 0); r != OK {
			return true, r, int(m.Key.Start)
		}
	}
	return false, OK, 0
}

// object is an open object: the offset of its '{', the index in keys
// (hashed) or spans (not hashed: its first smallObject keys) of its first
// key, and whether one of its keys in spans is not plain (keySpan.plain).
type object struct {
	start, base int
	// kbase (not hashed) is the index in keys of the hash of the object's
	// 17th key: keys past its first smallObject are hashed as they come.
	kbase int
	mixed bool
}

// keySpan is a key of an open object: b[start:end], quotes included,
// whether it holds an escape, and whether it is plain: no escape and,
// with s.fold, its own fold (jsonscan.Folded: no capital, no byte ≥
// 0x80), so that its text as written is the text the comparison reads.
type keySpan struct {
	print          uint64 // keyPrint of the key
	start, end     int
	escaped, plain bool
}

// str classifies string bytes: 1 ends the fast path (quote, backslash,
// control character).
var str = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	return t
}()

// strUTF8 is str that also stops at every byte ≥ 0x80, for the UTF-8 check.
var strUTF8 = func() (t [256]uint8) {
	t = str
	for c := 0x80; c < 0x100; c++ {
		t[c] = 1
	}
	return t
}()

// encodingReason refines a Syntax error at off when the input must be
// UTF-8: a byte-order mark at the start, a NUL byte (UTF-16 and UTF-32 text
// holds one in its first four bytes), or a byte that starts no valid UTF-8
// sequence is an encoding problem rather than a grammar one.
func encodingReason(b []byte, off int) (Reason, int) {
	if off == 0 && len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		return ByteOrderMark, 0
	}
	if off < len(b) {
		if c := b[off]; c == 0 {
			return NotUTF8, off
		} else if c >= utf8.RuneSelf {
			if r, size := utf8.DecodeRune(b[off:]); r == utf8.RuneError && size <= 1 {
				return NotUTF8, off
			}
		}
	}
	for i := range min(len(b), 4) {
		if b[i] == 0 {
			return NotUTF8, i
		}
	}
	return Syntax, off
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the offset of the first byte at or after b[i] that is
// not JSON whitespace (len(b) when none is). Every whitespace byte is at
// most ' ', so a byte above it (the usual case: JSON bodies are mostly
// written without whitespace) ends the loop with one comparison.
func (s *scanner) skipSpace(i int) int { return skipSpace(s.b, i) }

// skipSpace is scanner.skipSpace on b, for the scan loop, which holds b
// in a local.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// push opens a container at depth (after increment) d, at offset off.
func (s *scanner) push(d, off int, isObject bool) {
	w := (d - 1) >> 6
	if w >= len(s.stack) {
		s.stack = append(s.stack, make([]uint64, len(s.stack)+1)...)
	}
	bit := uint64(1) << ((d - 1) & 63)
	if isObject {
		s.stack[w] |= bit
		if s.dup {
			base := len(s.spans)
			if s.hashed {
				base = len(s.keys)
			}
			s.objs = append(s.objs, object{start: off, base: base, kbase: len(s.keys)})
		}
	} else {
		s.stack[w] &^= bit
	}
}

// isObject reports whether the container at depth d is an object.
func (s *scanner) isObject(d int) bool {
	return s.stack[(d-1)>>6]&(1<<((d-1)&63)) != 0
}

// scan checks the whole input.
func (s *scanner) scan() (Reason, int) {
	b := s.b
	n := len(b)
	depth := 0
	i := 0
	// obj: the innermost open container is an object (s.isObject(depth),
	// kept as depth moves, so that the end of every value need not read
	// the stack).
	obj := false
	if s.resume > 0 {
		s.resumeState()
		depth, i = 2, s.resume
		goto resumed
	}

value: // a value is expected at i (after optional whitespace)
	// Whitespace, rare in request bodies, is skipped only when there is
	// some: a byte above ' ' is where the value starts (spaced, below).
	if i >= n || b[i] <= ' ' {
		if i = skipSpace(b, i); i >= n {
			return Truncated, n
		}
	}
	if s.inField && depth == 3 { // the value of the field fieldKey recorded
		s.lay.Fields[len(s.lay.Fields)-1].Value.Start = int32(i)
	}
	if uint(depth-1) < 2 && s.lay != nil { // depth 1 or 2
		s.valueStarts(depth, i)
		if s.known != nil {
			if end := s.vouched(depth, i); end > i {
				i = end
				goto after
			}
		}
	}
	switch c := b[i]; c {
	case '{', '[':
		if depth >= 3 && c == '{' && s.reuse != nil && b[i-1] == ':' && s.reusedAt(i) {
			// The value of a member named in Options.Reuse, in an
			// object at depth 3 or more (none where the layout
			// records): stepped over when remembered, else remembered
			// when it closes.
			if l := s.remembered(b[i:], depth); l > 0 {
				i += l
				goto after
			}
			if s.rec < 0 {
				s.rec = i
			}
		}
		depth++
		if s.max > 0 && depth > s.max {
			return TooDeep, i
		}
		s.push(depth, i, c == '{')
		obj = c == '{'
		if i++; i >= n || b[i] <= ' ' {
			if i = skipSpace(b, i); i >= n {
				return Truncated, n
			}
		}
		if c == '[' {
			if b[i] == ']' {
				i++
				depth--
				obj = depth > 0 && s.isObject(depth)
				goto after
			}
			goto value
		}
		if b[i] == '}' {
			i++
			depth--
			obj = depth > 0 && s.isObject(depth)
			if s.dup {
				s.objs = s.objs[:len(s.objs)-1]
			}
			goto after
		}
		goto key
	case '"':
		// A short plain string value ("user", "gpt-4o-mini") ends within
		// the two words after its quote: found without calling str.
		if i+17 <= n {
			w := binary.LittleEndian.Uint64(b[i+1 : i+9])
			if m := stopMask(w, s.high); m != 0 {
				if q := bits.TrailingZeros64(m) >> 3; b[i+1+q] == '"' {
					i += 2 + q
					goto after
				}
			} else if m := stopMask(binary.LittleEndian.Uint64(b[i+9:i+17]), s.high); m != 0 {
				if q := bits.TrailingZeros64(m) >> 3; b[i+9+q] == '"' {
					i += 10 + q
					goto after
				}
			}
		}
		end, _, r := s.str(i)
		if r != OK {
			return r, end
		}
		i = end
	case 't':
		if r, off := lit(b, i, "true"); r != OK {
			return r, off
		}
		i += 4
	case 'f':
		if r, off := lit(b, i, "false"); r != OK {
			return r, off
		}
		i += 5
	case 'n':
		if r, off := lit(b, i, "null"); r != OK {
			return r, off
		}
		i += 4
	default:
		if c != '-' && (c < '0' || c > '9') {
			return Syntax, i
		}
		end, r := number(b, i)
		if r != OK {
			return r, end
		}
		i = end
	}

after: // a value ended just before i
	if uint(depth-1) < 2 && s.lay != nil { // depth 1 or 2
		s.valueEnds(depth, i)
		if depth == 1 && s.resumedOpen { // the resumed array ended
			if done, r, off := s.resumedEnd(i); done {
				return r, off
			}
		}
	} else if s.inField && depth == 3 {
		s.lay.Fields[len(s.lay.Fields)-1].Value.End = int32(i)
		s.inField = false
	}
resumed: // a value ended just before i, recorded
	if i < n && b[i] <= ' ' {
		i = skipSpace(b, i)
	}
	if depth == 0 {
		if i < n {
			return Trailing, i
		}
		return OK, 0
	}
	if i >= n {
		return Truncated, n
	}
	if obj {
		switch b[i] {
		case ',':
			i++
			goto key
		case '}':
			if s.dup {
				// An object of at most smallObject keys, compared as they
				// came (not hashed): its records are dropped here;
				// closeObject is for the rest.
				o := &s.objs[len(s.objs)-1]
				start := o.start
				if !s.hashed && len(s.keys) == o.kbase {
					s.spans = s.spans[:o.base]
					s.objs = s.objs[:len(s.objs)-1]
				} else if off, r := s.closeObject(i); r != OK {
					return r, off
				}
				if start == s.rec { // the object to remember closed, checked
					s.remember(b[start:i+1], depth-1)
					s.rec = -1
				}
			}
			i++
			depth--
			obj = depth > 0 && s.isObject(depth)
			goto after
		}
		return Syntax, i
	}
	switch b[i] {
	case ',':
		i++
		goto value
	case ']':
		i++
		depth--
		obj = depth > 0 && s.isObject(depth)
		goto after
	}
	return Syntax, i

key: // an object key is expected at i (after optional whitespace)
	if i >= n || b[i] <= ' ' {
		if i = skipSpace(b, i); i >= n {
			return Truncated, n
		}
	}
	if b[i] != '"' {
		return Syntax, i
	}
	{
		start := i
		var end int
		var escaped bool
		kf := keyUnknown
		// A short plain key ("role", "description") ends at the first
		// byte of the two words after its quote that str would stop at
		// (escRun's first words, searched alike), when that byte is a
		// quote: found here without calling str. Anything else is str's.
		if i+17 <= n {
			w := binary.LittleEndian.Uint64(b[i+1 : i+9])
			if m := stopMask(w, s.high); m != 0 {
				if q := bits.TrailingZeros64(m) >> 3; b[i+1+q] == '"' { // q: the key's length, below 8
					end = i + 2 + q
					// Its bytes, the rest zeros: Folded's verdict in one
					// word (no escape before the quote, zeros are not
					// capitals).
					kf = keyNotFolded
					if foldedWord(w & (1<<(8*q) - 1)) {
						kf = keyFolded
					}
					goto keyEnded
				}
			} else if w2 := binary.LittleEndian.Uint64(b[i+9 : i+17]); true {
				if m := stopMask(w2, s.high); m != 0 {
					if q := bits.TrailingZeros64(m) >> 3; b[i+9+q] == '"' { // the key's length is 8+q
						end = i + 10 + q
						kf = keyNotFolded
						if foldedWord(w) && foldedWord(w2&(1<<(8*q)-1)) {
							kf = keyFolded
						}
						goto keyEnded
					}
				}
			}
		}
		{
			e, esc, r := s.str(i)
			if r != OK {
				return r, e
			}
			end, escaped = e, esc
		}
	keyEnded:
		if s.dup {
			r := OK
			if s.hashed {
				r = s.addKey(start, end, escaped)
			} else {
				r = s.addSpanAs(start, end, escaped, kf)
			}
			if r != OK {
				return r, start
			}
		}
		if s.lay != nil {
			if depth == 1 && s.lay.room(n) {
				s.lay.Members = append(s.lay.Members, Member{Key: Span{int32(start), int32(end)}})
			} else if depth == 3 && s.fields {
				s.fieldKey(start, end)
			}
		}
		if end < n && b[end] == ':' { // the usual colon, right after the key
			i = end + 1
			goto value
		}
		i = skipSpace(b, end)
	}
	if i >= n {
		return Truncated, n
	}
	if b[i] != ':' {
		return Syntax, i
	}
	i++
	goto value
}

// fieldKey records the key b[start:end] of a member at depth 3 in
// Layout.Fields when its object is an element of a top-level array (and
// there is room), and marks its value as the one whose span is recorded
// next (inField).
func (s *scanner) fieldKey(start, end int) {
	l := s.lay
	if !s.isObject(1) || s.isObject(2) || l.Dropped || l.FieldsDropped {
		return
	}
	if len(s.b) >= 1<<31-1 || len(l.Fields) >= min(len(s.b)/16+16, MaxFields) {
		l.FieldsDropped = true
		return
	}
	l.Fields = append(l.Fields, Member{Key: Span{int32(start), int32(end)}})
	s.inField = true
}

// valueStarts records a value starting at i at depth 1 or 2: a member of
// the top-level object, or an element of an array that is one.
func (s *scanner) valueStarts(depth, i int) {
	if !s.isObject(1) || s.lay.Dropped {
		return
	}
	m := &s.lay.Members[len(s.lay.Members)-1]
	if depth == 1 {
		m.Value.Start = int32(i)
		m.First, m.Last = int32(len(s.lay.Elems)), int32(len(s.lay.Elems))
	} else if !s.isObject(2) && s.lay.room(len(s.b)) {
		s.lay.Elems = append(s.lay.Elems, Span{Start: int32(i)})
		m.Last = int32(len(s.lay.Elems))
	}
}

// vouched offers s.known the value at i, at depth 1 or 2 (as valueStarts
// records it), when it is one Known is offered: an array member of the
// top-level object, or an object element of one, under a key it wants.
// It returns the offset past the value when Known vouches for it, having
// recorded a list's elements in the layout; else i.
func (s *scanner) vouched(depth, i int) int {
	if !s.isObject(1) || s.lay.Dropped {
		return i
	}
	c := s.b[i]
	m := &s.lay.Members[len(s.lay.Members)-1]
	if depth == 1 {
		s.wants = 0
		if c != '[' {
			return i
		}
		s.wants = 1
		if !s.known.Wants(m.Key, false) {
			return i
		}
		s.wants |= 2
		if s.ends != nil {
			end := s.ends.End(i)
			if end == NotOffered {
				return i
			}
			if end > i+1 && end <= len(s.b) && s.b[end-1] == ']' && s.known.Vouch(i, end) {
				m.Unlaid = true
				return end
			}
		}
		// Its elements, as valueStarts and valueEnds would record them.
		j := s.skipSpace(i + 1)
		for j < len(s.b) && s.b[j] != ']' {
			e := Skip(s.b, j)
			if e <= j || !s.lay.room(len(s.b)) {
				return s.unvouched(m, i)
			}
			s.lay.Elems = append(s.lay.Elems, Span{Start: int32(j), End: int32(e)})
			m.Last = int32(len(s.lay.Elems))
			j = s.skipSpace(e)
			if j < len(s.b) && s.b[j] == ',' {
				j = s.skipSpace(j + 1)
			}
		}
		if j >= len(s.b) || !s.known.Vouch(i, j+1) {
			return s.unvouched(m, i)
		}
		return j + 1
	}
	if s.isObject(2) || c != '{' {
		return i
	}
	if s.wants&4 == 0 {
		s.wants |= 4
		if s.known.Wants(m.Key, true) {
			s.wants |= 8
		}
	}
	if s.wants&8 == 0 {
		return i
	}
	if s.ends != nil {
		end := s.ends.End(i)
		if end == NotOffered {
			return i
		}
		if end > i+1 && end <= len(s.b) && s.b[end-1] == '}' && s.known.Vouch(i, end) {
			return end
		}
	}
	end := Skip(s.b, i)
	if end < 0 || !s.known.Vouch(i, end) {
		return i
	}
	return end
}

// vouchTail offers s.tail the bytes after the resumed array's value,
// which ends at i (KnownTail), once. When it vouches for them, it records
// their members and returns done, with the scan's result (OK): their
// keys, and those of the members before the array, are not compared, as
// KnownTail vouches for the top-level object's keys too (they are the
// keys of one document that passed). Not done: the scan goes on at i, as
// if not asked.
func (s *scanner) vouchTail(i int) (done bool, r Reason, off int) {
	t := s.tail
	s.tail = nil
	if !s.isObject(1) || s.lay.Dropped {
		return false, OK, 0
	}
	ms := t.Tail(i)
	n := len(s.b)
	// Recorded only when there is room for all of them (Layout.room):
	// else the scan records what fits and drops the rest, as it would.
	if len(ms) == 0 || n >= 1<<31-1 || len(s.lay.Members)+len(s.lay.Elems)+len(ms) >= n/16+16 {
		return false, OK, 0
	}
	at := int32(i)
	e := int32(len(s.lay.Elems))
	for _, m := range ms {
		s.lay.Members = append(s.lay.Members, Member{
			Key:   Span{m.Key.Start + at, m.Key.End + at},
			Value: Span{m.Value.Start + at, m.Value.End + at},
			First: e, Last: e, Unlaid: m.Unlaid,
		})
	}
	s.lay.Tail = len(ms)
	return true, OK, 0
}

// unvouched forgets the elements vouched recorded for the member m, whose
// value at i is scanned after all, and returns i.
func (s *scanner) unvouched(m *Member, i int) int {
	if !s.lay.Dropped {
		s.lay.Elems = s.lay.Elems[:m.First]
		m.Last = m.First
	}
	return i
}

// Skip returns the offset just past the JSON value starting at b[i] (not
// whitespace), found without checking it: strings are skipped to their
// closing quote (escapes honoured), arrays and objects to their matching
// bracket, other values to the next delimiter. It is -1 when the input
// ends first. For a value that passes Check it is where Check finds the
// value's end; for any other input it is some offset, or -1. Time O(n),
// no allocation, no recursion.
func Skip(b []byte, i int) int {
	n := len(b)
	if i >= n {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
	default:
		for i < n && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
			i++
		}
		return i
	}
	depth := 0
	for i < n {
		switch b[i] {
		case '"':
			if i = skipString(b, i); i < 0 {
				return -1
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// skipString returns the offset past the string whose opening quote is at
// b[i], or -1 when the input ends first: the first quote after it not
// escaped (preceded by an even run of backslashes). The first 16 bytes are
// searched a word at a time (keys and short values end there, and a call
// of bytes.IndexByte costs more than the search), the rest with
// bytes.IndexByte.
func skipString(b []byte, i int) int {
	for i++; ; {
		j := quoteIn16(b, i)
		if j < 0 {
			k := min(i+16, len(b))
			q := bytes.IndexByte(b[k:], '"')
			if q < 0 {
				return -1
			}
			j = k + q
		}
		k := j
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
}

// quoteIn16 returns the offset of the first quote in b[i:i+16] (fewer bytes
// when b ends first), or -1 when there is none, by the "has a zero byte"
// trick on 64-bit words: its lowest flagged byte is always a zero one, so
// the first quote is found exactly.
func quoteIn16(b []byte, i int) int {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	for w := 0; w < 2; w++ {
		if i+8 > len(b) {
			for ; i < len(b); i++ { // fewer than 8 bytes left: all in the window
				if b[i] == '"' {
					return i
				}
			}
			return -1
		}
		x := binary.LittleEndian.Uint64(b[i:]) ^ (ones * '"')
		if z := (x - ones) &^ x & msb; z != 0 {
			return i + bits.TrailingZeros64(z)/8
		}
		i += 8
	}
	return -1
}

// valueEnds records the end of the value valueStarts recorded at depth.
func (s *scanner) valueEnds(depth, i int) {
	if !s.isObject(1) || s.lay.Dropped {
		return
	}
	if depth == 1 {
		s.lay.Members[len(s.lay.Members)-1].Value.End = int32(i)
	} else if !s.isObject(2) {
		s.lay.Elems[len(s.lay.Elems)-1].End = int32(i)
	}
}

// lit checks the literal word at b[i:].
func lit(b []byte, i int, word string) (Reason, int) {
	for j := 0; j < len(word); j++ {
		if i+j >= len(b) {
			return Truncated, len(b)
		}
		if b[i+j] != word[j] {
			return Syntax, i + j
		}
	}
	return OK, 0
}

// number checks the number starting at b[i] ('-' or a digit) and returns
// the offset after it.
func number(b []byte, i int) (int, Reason) {
	n := len(b)
	if b[i] == '-' {
		i++
		if i >= n {
			return n, Truncated
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, Syntax
	}
	if i < n && b[i] == '.' {
		i++
		if i >= n {
			return n, Truncated
		}
		if b[i] < '0' || b[i] > '9' {
			return i, Syntax
		}
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= n {
			return n, Truncated
		}
		if b[i] < '0' || b[i] > '9' {
			return i, Syntax
		}
		for i < n && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, OK
}

// str checks the string whose opening quote is at b[i] and returns the
// offset after its closing quote and whether it holds an escape.
func (s *scanner) str(i int) (end int, escaped bool, r Reason) {
	b := s.b
	n := len(b)
	i++
	bad := 0 // the end of a run found to hold a bad UTF-8 sequence
	for {
		var esc bool
		i, esc = escRun(b, i, s.high, s.stop)
		escaped = escaped || esc
		if i >= n {
			return n, escaped, Truncated
		}
		c := b[i]
		if c == '"' {
			return i + 1, escaped, OK
		}
		if c >= utf8.RuneSelf { // only with Options.UTF8
			// Text that holds one multi-byte character holds more (é in
			// French, every letter in Russian): the rest of the plain run,
			// to the next quote, backslash or control character (no byte
			// of a multi-byte sequence is one), is checked by one
			// utf8.Valid rather than stopped at each sequence. When it is
			// not valid, the bad sequence is found as before (the run is
			// not checked whole again: bad is its end, so that a long run
			// is not read once per sequence before its bad one).
			if i >= bad {
				j := plainRun(b, i+1, 0, &str)
				if utf8.Valid(b[i:j]) {
					i = j
					continue
				}
				bad = j
			}
			// The run of multi-byte sequences, checked at once; a bad one
			// is located rune by rune.
			j := i + 1
			for j < n && b[j] >= utf8.RuneSelf {
				j++
			}
			if utf8.Valid(b[i:j]) {
				i = j
				continue
			}
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, escaped, NotUTF8
			}
			i += size
			continue
		}
		if c != '\\' { // a control character
			return i, escaped, Syntax
		}
		escaped = true
		i++
		if i >= n {
			return n, escaped, Truncated
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			i++
			for range 4 {
				if i >= n {
					return n, escaped, Truncated
				}
				if !IsHex(b[i]) {
					return i, escaped, Syntax
				}
				i++
			}
		default:
			return i, escaped, Syntax
		}
	}
}

// plainRun returns the offset of the first byte at or after b[i] that ends
// a plain run of string bytes (stop[c] != 0: a quote, a backslash, a
// control character and, with the UTF-8 check, a byte ≥ 0x80), or len(b)
// when none does: eight bytes at a time by stopMask (high as stopMask
// takes it, matching stop), the last fewer than eight by the table. A leaf
// of few live values, so that the word loop runs in registers.
func plainRun(b []byte, i int, high uint64, stop *[256]uint8) int {
	for ; i+8 <= len(b); i += 8 {
		if m := stopMask(binary.LittleEndian.Uint64(b[i:i+8]), high); m != 0 {
			return i + bits.TrailingZeros64(m)/8 // the first byte that ends the run
		}
	}
	for i < len(b) && stop[b[i]] == 0 {
		i++
	}
	return i
}

// escRun is plainRun that steps over the two-byte escapes it meets (\",
// \\, \/, \b, \f, \n, \r, \t: shortEscape) and goes on with the words
// after them: it returns the offset of the first byte that ends the run
// and does not open such an escape (a quote, a control character, with
// the UTF-8 check a byte ≥ 0x80, a backslash before anything else: \u,
// a bad escape, or the end of b; len(b) when none does), and whether it
// stepped over an escape. str stopped at every backslash, and each escape
// cost it a return, its checks and a new call (about 40 instructions):
// the code and JSON text of the 128 KiB load benchmark's warm turn holds
// an escape every 11 bytes (a "\n" a line, a "\"" around every key and
// value), and those stops were most of the scan of its 8 KiB.
func escRun(b []byte, i int, high uint64, stop *[256]uint8) (int, bool) {
	esc := false
	for {
		// i ≤ last bounds the loop and, to the compiler, the load
		// (b[i:i+8] with i+8 ≤ len(b) cost a word three compares)
		if last := len(b) - 8; high != 0 {
			for ; i <= last; i += 8 {
				if m := stopMaskUTF8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
					i += bits.TrailingZeros64(m) / 8 // the first byte that ends the run
					goto stopped
				}
			}
		} else {
			for ; i <= last; i += 8 {
				if m := stopMask(binary.LittleEndian.Uint64(b[i:]), 0); m != 0 {
					i += bits.TrailingZeros64(m) / 8
					goto stopped
				}
			}
		}
		for i < len(b) && stop[b[i]] == 0 {
			i++
		}
	stopped:
		if i+1 < len(b) && b[i] == '\\' && shortEscape[b[i+1]] {
			i += 2
			esc = true
			continue
		}
		return i, esc
	}
}

// shortEscape marks the bytes that follow a backslash in the escapes of
// two bytes RFC 8259 §7 allows: " \ / b f n r t.
var shortEscape = func() (t [256]bool) {
	for _, c := range `"\/bfnrt` {
		t[c] = true
	}
	return t
}()

// stopMask flags (0x80) the bytes of w (eight bytes of a string, the
// first in the low byte) that end a plain run: a quote, a backslash, a
// control character (< 0x20), or one with a bit of high set (0x80 in each
// byte to stop at bytes ≥ 0x80, else 0), by the bit tricks of "has a zero
// byte" and "has a byte less than n" on 64-bit words. A byte above a
// flagged one may be flagged wrongly (a borrow), but the lowest flagged
// byte is always one that ends the run, and none is flagged when none does.
//
// The quote and the control characters are found by one "less than"
// test: flipping bit 1 of every byte (w ^ 0x02…) takes '"' (0x22) to 0x20
// and keeps the bytes below 0x20 below it (0x00 and 0x02 swap, and so on),
// while every other byte stays at 0x21 or above ('#' becomes 0x21, ' '
// and '!' become 0x22 and 0x23); so a byte of the flipped word below 0x21
// is exactly a quote or a control character.
func stopMask(w, high uint64) uint64 {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	flipped := w ^ (ones * 0x02)
	slash := w ^ (ones * '\\')
	return ((flipped-ones*0x21)&^flipped|(slash-ones)&^slash)&msb | w&high
}

// stopMaskUTF8 is stopMask(w, 0x8080808080808080) in fewer operations
// (the UTF-8 check's: the weigher's every scan): a byte of the flipped
// word (see stopMask) below 0x21 or at 0x80 and above has bit 7 set in
// flipped-0x21… or in flipped itself, so one OR takes both where stopMask
// masks the first with ^flipped and ORs w&high apart. As there, the lowest
// flagged byte is always one that ends the run, and none is flagged when
// none does.
func stopMaskUTF8(w uint64) uint64 {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	flipped := w ^ (ones * 0x02)
	slash := w ^ (ones * '\\')
	return ((flipped - ones*0x21) | flipped | (slash-ones)&^slash) & msb
}

// IsHex reports whether c is a hex digit of a \u escape (RFC 8259 §7:
// 0–9, a–f, A–F).
func IsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// addKey records the key b[start:end] (quotes included) of the innermost
// object; DuplicateKey or CaseVariantKey when a key already recorded for
// that object is the same (folded, with s.fold), else OK.
func (s *scanner) addKey(start, end int, escaped bool) Reason {
	if !s.hashed {
		return s.addSpan(start, end, escaped)
	}
	h := s.hashKey(start, end, escaped)
	o := s.objs[len(s.objs)-1]
	if len(s.keys)-o.base < smallObject {
		for _, k := range s.keys[o.base:] {
			if k == h {
				if _, r := s.sameHash(h, o.start, end); r != OK {
					return r
				}
			}
		}
	}
	s.appendKey(h, end)
	return OK
}

// appendKey appends the hash h of a key ending at end to keys.
func (s *scanner) appendKey(h uint64, end int) {
	if len(s.keys) == cap(s.keys) {
		// Double, but never past what the rest of the input can hold (a
		// key takes at least 4 bytes: `"":0`), so that a body of a million
		// keys allocates about twice their hashes, not five times.
		c := min(2*cap(s.keys), len(s.keys)+(len(s.b)-end)/4+1)
		s.keys = append(make([]uint64, 0, c), s.keys...)
	}
	s.keys = append(s.keys, h)
}

// addSpan is addKey without hashing (not s.hashed): a key among an
// object's first smallObject is compared with the earlier ones, first by a
// fingerprint of its raw bytes (keyPrint: length and last 8 bytes), then
// as written when the fingerprints match; and unescaped (and, with s.fold,
// folded) when either key is not plain (keySpan.plain): so a small object
// (every object of a streamed chunk, every message of a chat body) costs
// a word comparison per pair of keys rather than a hash per key. Two plain
// keys are the same once folded exactly when they are the same as
// written, so a pair of them is never a CaseVariantKey. A later key of a
// larger object is hashed into keys (8 bytes, as the hashed path holds
// it: spans hold at most smallObject keys per open object) and compared
// at closeObject. The verdicts are the hashed path's: DuplicateKey exactly
// when the unescaped texts are equal, CaseVariantKey (with s.fold) when
// only their folds are (that path confirms a hash match by the same
// comparisons, sameKey; the earlier keys of an object being distinct once
// folded, at most one of them matches).
func (s *scanner) addSpan(start, end int, escaped bool) Reason {
	return s.addSpanAs(start, end, escaped, keyUnknown)
}

// keyFold is what the caller of addSpanAs knows of a key: nothing
// (keyUnknown), or that it is plain and its own fold (keyFolded: the scan's
// short-key path, whose words hold the key's bytes), or that it is not
// (keyNotFolded).
type keyFold uint8

const (
	keyUnknown keyFold = iota
	keyFolded
	keyNotFolded
)

// addSpanAs is addSpan told whether the key is plain and folded (kf; with
// keyUnknown it finds out). The usual key (one the scan's short-key path
// found plain, among an object's first smallObject, in an object whose
// keys so far are all plain) is compared and recorded here, in a
// function of few live values; any other goes to addSpanRest.
func (s *scanner) addSpanAs(start, end int, escaped bool, kf keyFold) Reason {
	o := &s.objs[len(s.objs)-1]
	spans := s.spans
	if (kf == keyFolded || kf == keyNotFolded && !s.fold) && !escaped && !o.mixed && len(spans)-o.base < smallObject {
		b := s.b
		fp := keyPrint(b, start, end)
		for k := o.base; k < len(spans); k++ {
			if p := &spans[k]; p.print == fp && string(b[p.start:p.end]) == string(b[start:end]) {
				return DuplicateKey
			}
		}
		s.spans = append(spans, keySpan{print: fp, start: start, end: end, plain: true})
		return OK
	}
	return s.addSpanRest(start, end, escaped, kf)
}

// addSpanRest is addSpanAs for any key: the hashed keys past an object's
// first smallObject, keys not known plain, objects holding one that is
// not (o.mixed).
func (s *scanner) addSpanRest(start, end int, escaped bool, kf keyFold) Reason {
	o := &s.objs[len(s.objs)-1]
	spans := s.spans[o.base:]
	if len(spans) >= smallObject {
		s.appendKey(s.hashKey(start, end, escaped), end)
		return OK
	}
	fp := keyPrint(s.b, start, end)
	var plain bool
	switch kf {
	case keyFolded:
		plain = true
	case keyNotFolded:
		plain = !s.fold
	default:
		plain = !escaped && (!s.fold || Folded(s.b[start+1:end-1]))
	}
	if plain && !o.mixed {
		for i := range spans {
			if spans[i].print == fp && string(s.b[spans[i].start:spans[i].end]) == string(s.b[start:end]) {
				return DuplicateKey
			}
		}
	} else {
		k := keySpan{print: fp, start: start, end: end, escaped: escaped, plain: plain}
		for i := range spans {
			if r := s.sameSpan(spans[i], k); r != OK {
				return r
			}
		}
	}
	o.mixed = o.mixed || !plain
	s.spans = append(s.spans, keySpan{print: fp, start: start, end: end, escaped: escaped, plain: plain})
	return OK
}

// sameSpan compares the keys p and k of one object, as sameKey does:
// DuplicateKey when they unescape to the same text, CaseVariantKey when
// (with s.fold) they do once folded, else OK.
func (s *scanner) sameSpan(p, k keySpan) Reason {
	if p.print == k.print && string(s.b[p.start:p.end]) == string(s.b[k.start:k.end]) {
		return DuplicateKey
	}
	if p.plain && k.plain {
		return OK // both as the comparison reads them, and different
	}
	a, b := s.b[k.start+1:k.end-1], s.b[p.start+1:p.end-1]
	if k.escaped || p.escaped {
		s.scratch[0] = unescape(s.scratch[0][:0], a)
		s.scratch[1] = unescape(s.scratch[1][:0], b)
		a, b = s.scratch[0], s.scratch[1]
		if string(a) == string(b) {
			return DuplicateKey
		}
	}
	if s.fold {
		s.scratch[2] = FoldKey(s.scratch[2][:0], a)
		s.scratch[3] = FoldKey(s.scratch[3][:0], b)
		if string(s.scratch[2]) == string(s.scratch[3]) {
			return CaseVariantKey
		}
	}
	return OK
}

// keyPrint is a fingerprint of the raw key b[start:end]: its length mixed
// with its last 8 bytes (fewer for a shorter key). Keys equal as written
// have equal prints; unequal ones usually differ.
func keyPrint(b []byte, start, end int) uint64 {
	n := end - start
	var w uint64
	if end >= 8 {
		w = binary.LittleEndian.Uint64(b[end-8:])
		if n < 8 {
			w &= ^uint64(0) << (8 * (8 - n)) // the bytes before the key are not its own
		}
	} else {
		for i, c := range b[start:end] { // placed as the load above places them
			w |= uint64(c) << (8 * (8 - n + i))
		}
	}
	return w ^ uint64(n)*0x9e3779b97f4a7c15
}

// closeObject pops the innermost object, which ends with the '}' at end.
// For an object of more than smallObject keys (not all compared on the way)
// it sorts their hashes and compares neighbours; r is DuplicateKey or
// CaseVariantKey, with the offset of the repeated key's second occurrence,
// when two are the same.
func (s *scanner) closeObject(end int) (off int, r Reason) {
	o := s.objs[len(s.objs)-1]
	s.objs = s.objs[:len(s.objs)-1]
	var keys []uint64
	if s.hashed {
		keys = s.keys[o.base:]
		s.keys = s.keys[:o.base]
	} else {
		spans := s.spans[o.base:]
		s.spans = s.spans[:o.base]
		if len(s.keys) == o.kbase { // at most smallObject keys, all compared
			return 0, OK
		}
		// The hashes the hashed path holds: the later keys' and those of
		// the first smallObject.
		for _, p := range spans {
			s.keys = append(s.keys, s.hashKey(p.start, p.end, p.escaped))
		}
		keys = s.keys[o.kbase:]
		s.keys = s.keys[:o.kbase]
	}
	if len(keys) <= smallObject {
		return 0, OK
	}
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] && (i == 1 || keys[i-2] != keys[i]) {
			if off, r := s.sameHash(keys[i], o.start, end); r != OK {
				return off, r
			}
		}
	}
	return 0, OK
}

// sameHash finds the keys of the object whose '{' is at start, up to end,
// that hash to h, and reports whether two of them are the same key
// (DuplicateKey) or the same once folded (CaseVariantKey), with the later
// one's offset; OK when none are. It rescans the object: it runs only when
// two hashes are equal, almost always because the keys are (distinct keys
// sharing a 64-bit hash are possible, but nobody can aim for one: the seed
// is secret).
func (s *scanner) sameHash(h uint64, start, end int) (int, Reason) {
	var found []int
	depth, key := 0, false
	for i := start; i < end; i++ {
		switch s.b[i] {
		case '"':
			e, escaped, _ := s.str(i)
			if key && depth == 1 && s.hashKey(i, e, escaped) == h {
				for _, prev := range found {
					if r := s.sameKey(prev, i); r != OK {
						return i, r
					}
				}
				found = append(found, i)
			}
			key = false
			i = e - 1
		case '{', '[':
			depth++
			key = depth == 1
		case ',':
			key = depth == 1
		case '}', ']':
			depth--
		}
	}
	return 0, OK
}

// hashKey hashes the unescaped (and, with s.fold, case-folded) text of the
// key b[start:end].
func (s *scanner) hashKey(start, end int, escaped bool) uint64 {
	raw := s.b[start+1 : end-1]
	if escaped {
		s.scratch[0] = unescape(s.scratch[0][:0], raw)
		raw = s.scratch[0]
	}
	if s.fold && !Folded(raw) {
		s.scratch[2] = FoldKey(s.scratch[2][:0], raw)
		raw = s.scratch[2]
	}
	return maphash.Bytes(seed, raw)
}

// sameKey compares the keys whose opening quotes are at a and b:
// DuplicateKey when they unescape to the same text, CaseVariantKey when
// (with s.fold) they do once folded, else OK.
func (s *scanner) sameKey(a, b int) Reason {
	ka := s.rawKey(a)
	kb := s.rawKey(b)
	if string(ka) == string(kb) {
		return DuplicateKey
	}
	s.scratch[0] = unescape(s.scratch[0][:0], ka)
	s.scratch[1] = unescape(s.scratch[1][:0], kb)
	if string(s.scratch[0]) == string(s.scratch[1]) {
		return DuplicateKey
	}
	if s.fold {
		s.scratch[2] = FoldKey(s.scratch[2][:0], s.scratch[0])
		s.scratch[3] = FoldKey(s.scratch[3][:0], s.scratch[1])
		if string(s.scratch[2]) == string(s.scratch[3]) {
			return CaseVariantKey
		}
	}
	return OK
}

// rawKey is the text between the quotes of the (already checked) string
// whose opening quote is at off.
func (s *scanner) rawKey(off int) []byte {
	end, _, _ := s.str(off)
	return s.b[off+1 : end-1]
}

// unescape appends the text of the checked string body raw to dst:
// escapes decoded, a surrogate pair joined, an unpaired surrogate as
// U+FFFD (as encoding/json reads it), other bytes as they are.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := Hex4(raw[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2 = Hex4(raw[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
	}
	return dst
}

// Hex4 reads the four hex digits of a \u escape at the start of b (at
// least 4 bytes, each IsHex) as the UTF-16 code unit they write.
func Hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
