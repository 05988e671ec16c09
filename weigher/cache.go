package weigher

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// DefaultCacheBytes is [Options.CacheBytes]' default, in bytes: 32 MiB
// hold 1 MiB of end hints (hints.go), 2 MiB of resume points (resume.go:
// about 7,000 conversation prefixes) and about 475,000 entries, one per
// remembered element (its count and the mark that it passed the strict
// scan and the case-variant field check): the messages, input items, tool
// lists or system prompts of a few thousand agent conversations of forty
// turns.
const DefaultCacheBytes = 32 << 20

// cacheEntryBytes is the memory, in bytes, one cached count holds: its way
// of the count table (slot and entry) and its share of its set's lock and
// marks. Measured by TestCacheEntryBytes (58 bytes on amd64); the round
// figure errs high, so the cache stays within its configured bytes.
const cacheEntryBytes = 64

// minCachedBytes is the shortest element, in bytes of JSON, whose count is
// cached: below it, counting costs about what hashing and a lookup do.
const minCachedBytes = 64

// tally is the weight of one counted element of a request: text tokens
// (before a model's safety factor), tokens of fixed cost (framing, images,
// documents), and whether it refers to input the body does not hold.
type tally struct {
	text, fixed int64
	hidden      bool
	// audio: the element sends audio or refers to an earlier audio answer
	// (chat's input_audio part, an assistant message's audio by id).
	audio bool
}

// add adds u to t: the sums of its counts, either's flags.
func (t *tally) add(u tally) {
	t.text += u.text
	t.fixed += u.fixed
	t.hidden = t.hidden || u.hidden
	t.audio = t.audio || u.audio
}

// entry is what the cache holds under a key: a count (t, when counted),
// and, under a field check's context (see elemMemo), the mark that the
// element passed that check, with the count context t was counted in (ctx).
type entry struct {
	t       tally
	ctx     uint64 // under a field check's context: the count context of t
	counted bool   // t is a count (false: a mark alone)
	// check is the key's check (cacheKey.check) it was written under:
	// the cache holds it under the key's slot, and an entry found there
	// counts only when its check is the looked-up key's too.
	check uint64
}

// cacheKey names one element's count: a 128-bit xxh3 of its exact bytes,
// seeded with a secret chosen at start-up so that callers cannot aim
// collisions at it, its length, and the hash of the context it was counted
// in (see countContext).
type cacheKey struct {
	h   xxh3.Uint128
	ctx uint64
	n   int
}

// slot is the 64-bit key the cache holds k's entry under: its hash's low
// half (seeded, so not aimed at) mixed with its context and length. A map
// hashes an integer key in a few instructions, where the 40-byte cacheKey
// went through maphash.Comparable (about 280 instructions a lookup or
// write).
//
// check is the rest of k, kept in the entry: its hash's high half mixed
// with its context and length the other way. Keys of one context and
// length that agree on slot and check agree on both halves of the hash, so
// are one key; keys that differ in context or length agree on both only by
// a chance of 2⁻¹²⁸ of the seeded hash, as two byte strings would. Two
// keys sharing a slot cost a miss, never a wrong count.
func (k cacheKey) slot() uint64 {
	return k.h.Lo ^ bits.RotateLeft64(k.ctx, 29) ^ uint64(k.n)*0x9e3779b97f4a7c15
}

// check: see slot.
func (k cacheKey) check() uint64 {
	return k.h.Hi ^ bits.RotateLeft64(k.ctx, 41) ^ uint64(k.n)*0xbf58476d1ce4e5b9
}

// countCache remembers the counts of request elements (chat messages,
// Responses input items, Anthropic system prompts and messages, tool
// lists), so that a conversation resent with one more turn costs the new
// turn plus one hash pass over the rest. A count is a pure function of the
// element's bytes and its context (request kind, encoding, model, flags), so
// one cache serves every [Weigher] of the process, across config reloads.
//
// The entries are held in a count table (countTable: sets of countWays
// entries, CLOCK eviction within a set): every new count is kept, and the
// entry a full set gives up is the one its hand reaches first that was not
// read since the hand last passed it, so entries written once go about
// oldest first, as they did under golang-lru's LRU, used before. A growing
// conversation's messages are written once and, its later bodies resuming
// after them (resume.go), read only when a trim moves the body's start, a
// few turns on: kept by age, they are there then however much one-off
// traffic came between, up to about the cache's size. Otter's W-TinyLFU,
// used before the LRU, admitted a new entry only against a victim its
// frequency sketch rated lower; once one-off traffic had filled the cache
// (and its misses had shrunk the admission window to nothing) it turned
// most of such messages away, and the bodies after each trim counted the
// conversation again (issue #13, TestFullCacheKeepsGrowingConversation).
type countCache struct {
	// c holds the entries; replaced, empty, when a resize changes its
	// size or caching is turned off.
	c    atomic.Pointer[countTable]
	size int // entries c holds at most; under sharedCacheMu once shared
	seed uint64
	// prefixBase is the hasher every prefix hash of a resume point starts
	// from (newPrefixBase of seed); read only.
	prefixBase   *xxh3.Hasher
	hits, misses atomic.Uint64
	resumes      atomic.Uint64 // requests weighed from a resume point
	tails        atomic.Uint64 // requests whose tail was vouched (resume.go's Tails)
	// hints are the end hints of remembered elements (hints.go), taking
	// 1/hintShare of the cache's bytes; replaced when a resize changes
	// their size (nil: none).
	hints atomic.Pointer[hintTable]
	// resume holds resume points (resume.go), taking 1/resumeShare of
	// the cache's bytes; replaced, empty, when a resize changes its size.
	resume atomic.Pointer[resumeTable]
	// contexts are the count contexts made lately (context), direct-mapped.
	contexts [contextSlots]atomic.Pointer[contextMemo]
}

var (
	sharedCacheMu sync.Mutex
	sharedCache   *countCache
)

// cacheOf returns the process's count cache resized to bytes (0:
// DefaultCacheBytes; at least one entry's worth), or nil when bytes is
// negative (caching off).
func cacheOf(bytes int64) *countCache {
	sharedCacheMu.Lock()
	defer sharedCacheMu.Unlock()
	if bytes < 0 {
		// Off (a reload may turn it off): its memory goes once the
		// weighers still holding it are done.
		if sharedCache != nil {
			sharedCache.c.Store(newCountTable(1))
			sharedCache = nil
		}
		return nil
	}
	if sharedCache == nil {
		sharedCache = newCountCache(bytes)
	} else {
		sharedCache.resize(bytes)
	}
	return sharedCache
}

// newCountCache returns a count cache holding at most bytes (0:
// DefaultCacheBytes) of entries of cacheEntryBytes each, with a fresh
// random seed.
func newCountCache(bytes int64) *countCache {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	size, hints, resume := cacheLimit(bytes)
	seed := binary.LittleEndian.Uint64(b[:])
	c := &countCache{seed: seed, prefixBase: newPrefixBase(seed), size: size}
	c.c.Store(newCountTable(size))
	c.hints.Store(hints)
	c.resume.Store(resume)
	return c
}

// cacheLimit splits a cache of bytes (0: the default) between the hint
// table (1/hintShare of it), the resume table (1/resumeShare) and the
// entries: it returns how many entries of cacheEntryBytes the rest holds
// (at least one) and the tables.
func cacheLimit(bytes int64) (int, *hintTable, *resumeTable) {
	if bytes == 0 {
		bytes = DefaultCacheBytes
	}
	hints := newHintTable(bytes / hintShare)
	resume := newResumeTable(bytes / resumeShare)
	return int(max((bytes-hints.bytes()-resume.bytes())/cacheEntryBytes, 1)), hints, resume
}

// resize sets c's bound to bytes (0: the default): a count table, hint
// table or resume table of another size replaces the old one, empty.
func (c *countCache) resize(bytes int64) {
	size, hints, resume := cacheLimit(bytes)
	if c.size != size {
		c.c.Store(newCountTable(size))
		c.size = size
	}
	if hints.bytes() != c.hints.Load().bytes() {
		c.hints.Store(hints)
	}
	if resume.bytes() != c.resume.Load().bytes() {
		c.resume.Store(resume)
	}
}

// countContext is the hash of what, besides an element's bytes, its count
// depends on: the request kind and role of the element (tag), the encoding,
// the model (image and document rules differ by model) and flags (whether
// thinking blocks count, the tool choice). Zero when caching is off.
//
// The contexts made lately are held (contextMemo): a request makes two or
// more, each about 300 instructions of hashing, where a held one is a few
// string compares (TestContextMemoSameAsHash, FuzzContextMemoSameAsHash:
// contextHash, the hash itself, is the reference).
func (c *countCache) context(tag, encoding, model string, flags string) uint64 {
	if c == nil {
		return 0
	}
	h := uint(len(tag))*0x9e37 ^ uint(len(encoding))*0x85eb ^ uint(len(model))*0xc2b3 ^ uint(len(flags))*0x27d4
	if model != "" {
		h ^= uint(model[len(model)-1])*0x165667b1 ^ uint(model[len(model)/2])*0xd3a2646c
	}
	if tag != "" {
		h ^= uint(tag[len(tag)-1]) * 0x61c88647
	}
	slot := &c.contexts[(h^h>>11)%contextSlots]
	if m := slot.Load(); m != nil && m.tag == tag && m.encoding == encoding && m.model == model && m.flags == flags {
		return m.ctx
	}
	ctx := c.contextHash(tag, encoding, model, flags)
	if len(tag)+len(encoding)+len(model)+len(flags) > maxContextMemoBytes {
		// A caller names the model, as long as its body allows (the
		// proxy refuses a name over 256 bytes only once the body is
		// weighed): held, 64 such names would hold 64 bodies' worth.
		return ctx
	}
	slot.Store(&contextMemo{tag: strings.Clone(tag), encoding: strings.Clone(encoding), model: strings.Clone(model), flags: strings.Clone(flags), ctx: ctx})
	return ctx
}

// contextSlots is how many contexts a cache holds made (contextMemo).
const contextSlots = 64

// maxContextMemoBytes bounds the fields of a context held made, in bytes:
// a longer one is hashed each time, so that the memo holds at most
// contextSlots × this much of what callers named.
const maxContextMemoBytes = 256

// contextMemo is one context held made: its fields (copies) and hash.
type contextMemo struct {
	tag, encoding, model, flags string
	ctx                         uint64
}

// contextHash is countContext made afresh: the seeded hash of the fields,
// each length-prefixed.
func (c *countCache) contextHash(tag, encoding, model string, flags string) uint64 {
	var buf [128]byte
	b := buf[:0]
	for _, field := range [...]string{tag, encoding, flags, model} { // each length-prefixed: no two tuples alike
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	return xxh3.HashSeed(b, c.seed)
}

// count returns the tally of the element raw (its JSON text) in context
// ctx: the remembered one, or fn's, remembered when raw is long enough to be
// worth it and fn counted it exactly (b, the request's counting budget, was
// not spent: a count past it is an upper bound). With a nil cache it is
// fn().
func (c *countCache) count(b *budget, ctx uint64, raw string, fn func() tally) tally {
	if c == nil || len(raw) < minCachedBytes {
		return fn()
	}
	k := c.key(ctx, raw)
	if e, ok := c.get(k); ok && e.counted {
		c.hits.Add(1)
		return e.t
	}
	c.misses.Add(1)
	t := fn()
	if b == nil || !b.over {
		c.set(k, entry{t: t, ctx: ctx, counted: true})
	}
	return t
}

// get returns the entry held under k (marking it read: see countTable);
// false when there is none (or the entry in k's slot is another key's: see
// cacheKey.slot).
func (c *countCache) get(k cacheKey) (entry, bool) {
	e, ok := c.c.Load().Get(k.slot())
	if !ok || e.check != k.check() {
		return entry{}, false
	}
	return e, true
}

// set holds e under k, replacing what k's slot held (when k's set is full,
// the entry its CLOCK hand evicts goes).
func (c *countCache) set(k cacheKey, e entry) {
	e.check = k.check()
	c.c.Load().Add(k.slot(), e)
}

// fieldsContext is the context of the objects checkFields reads with f at
// depth, in bodies checked under the nesting limit maxDepth: a key of the
// cache names one it found fine, in a body that passed the strict scan
// (elemMemo.Vouch trusts it for both).
func (c *countCache) fieldsContext(f *fields, depth, maxDepth int) uint64 {
	if c == nil {
		return 0
	}
	var b [32]byte
	copy(b[:], "fields\x00")
	binary.LittleEndian.PutUint64(b[8:], f.id)
	binary.LittleEndian.PutUint64(b[16:], uint64(depth))
	binary.LittleEndian.PutUint64(b[24:], uint64(maxDepth))
	return xxh3.HashSeed(b[:], c.seed)
}

// listContext is the context of the lists of objects checkFields reads
// whole with f at depth (fields.whole), in bodies checked under maxDepth: a
// key of the cache names one whose every element it found fine.
func (c *countCache) listContext(f *fields, depth, maxDepth int) uint64 {
	if c == nil {
		return 0
	}
	var b [32]byte
	copy(b[:], "flist\x00")
	binary.LittleEndian.PutUint64(b[8:], f.id)
	binary.LittleEndian.PutUint64(b[16:], uint64(depth))
	binary.LittleEndian.PutUint64(b[24:], uint64(maxDepth))
	return xxh3.HashSeed(b[:], c.seed)
}

// key is the cache key of raw in context ctx.
func (c *countCache) key(ctx uint64, raw string) cacheKey {
	return cacheKey{h: xxh3.HashString128Seed(raw, c.seed), ctx: ctx, n: len(raw)}
}

// CacheStats are the count cache's counters since start-up.
type CacheStats struct {
	// Hits and Misses count lookups of elements long enough to be cached
	// (64 bytes of JSON or more); Hits also counts such elements of a
	// prefix a request resumed after (resume.go), found remembered without
	// a lookup.
	Hits, Misses uint64
	// Resumed counts requests whose scan resumed from a resume point: the
	// elements of a remembered prefix of their body neither scanned nor
	// looked up (those whose prefix was counted for another model are
	// then weighed again, whole).
	Resumed uint64
	// Entries is the number of counts held; Bytes their estimated memory,
	// in bytes (entries × the measured bytes per entry).
	Entries, Bytes int64
}

// CacheStats returns the counters of w's count cache (the process's, shared
// by every Weigher); zero when caching is off.
func (w *Weigher) CacheStats() CacheStats { return w.cache.stats() }

// SharedCacheStats returns the counters of the process's count cache, which
// every Weigher built with caching on shares; zero before the first.
func SharedCacheStats() CacheStats {
	sharedCacheMu.Lock()
	c := sharedCache
	sharedCacheMu.Unlock()
	return c.stats()
}

func (c *countCache) stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	n := int64(c.c.Load().Len())
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Resumed: c.resumes.Load(), Entries: n, Bytes: n * cacheEntryBytes}
}
