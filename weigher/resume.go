package weigher

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// Resume points. An agent resends its conversation with one more turn:
// the new body is the last one up to just after its last message, then
// `,{…}` and the rest. The count cache spares counting the old messages,
// but the strict scan still finds, hashes and looks up each of them. A
// resume point (checkpoint) remembers, for the prefix body[:k] that ends
// just after the last element of a top-level array (chat's "messages"),
// what weighing it left: the top-level members before that array (their
// spans, for the layout and the duplicate-key check), and the sum of the
// array's element counts up to k (with the count context they were
// counted in). A body that starts with the same k bytes is scanned from k
// on (jsonscan.Options.Resume), its field check and its counting see only
// the elements after k, and the remembered sum stands for the rest: the
// estimate is the one a full weighing gives (TestResumeSameEstimates,
// FuzzResumeChat), for a hash pass over body[:k] in place of the
// per-element work.
//
// Finding one: checkpoints are filed in a set-associative table under the
// seeded hash of the body's first n bytes (n the longest of 64, 128, 256…
// 64 KiB not past k), resumeWays a set, the newest replacing the oldest.
// A lookup hashes the body's first 64, 128, 256… bytes (one pass, to the
// longest not past the body), tries those sets longest first, keeps the
// candidates whose last resumeTailBytes bytes before their k are the
// body's there, and confirms the newest with the hash of body[:k]. That
// hash is the same pass that, continued to the new k, files the body's
// own checkpoint.
//
// Why a hash match is the same prefix: the hash is xxh3's 128-bit hash,
// seeded with the count cache's secret seed (drawn from crypto/rand at
// start-up, never shown), of exactly k bytes; the context (kind, fields,
// nesting limit) and k are compared apart. A caller who does not know the
// seed cannot aim two different prefixes at one hash: each comparison of
// two different prefixes matches by a chance of about 2⁻¹²⁸, so with 2⁴⁰
// requests each tried against a few candidates the chance of any false
// match stays below 2⁻⁸⁵ — the argument, and the hash, of the count cache
// (cacheKey), whose false hit would cost the same wrong count.
//
// Memory: the table is made once per cache size, 1/resumeShare of
// Options.CacheBytes (2 MiB of the default 32 MiB, about 7,000
// checkpoints of resumeEntryBytes); filing a checkpoint copies it into a
// slot and never allocates, so callers sending many prefixes only evict.

// resumeShare is the share of Options.CacheBytes the resume table takes.
const resumeShare = 16

// resumeWays is how many checkpoints share a set of the table.
const resumeWays = 4

// A checkpoint is filed under the body's first n bytes, n the longest of
// resumeMinKey, twice that, four times… up to resumeMaxKey, not past its
// k. A checkpoint with k below resumeMinKey is not kept (such a body costs
// little to scan). Conversations that share a long system prompt (and
// tools) share their first bytes: keys of lengths doubling up to 64 KiB
// tell them apart once their own text lies within the key, where keys of
// at most 256 bytes filed them all in one set, which holds resumeWays
// (TestResumeSharedSystemPrompt).
const (
	resumeMinKey  = 64
	resumeMaxKey  = 64 << 10
	resumeKeyLens = 11 // 64 B … 64 KiB
)

// resumeTailBytes is how many bytes before k a checkpoint keeps, to drop
// candidates without hashing the prefix.
const resumeTailBytes = 16

// maxResumeMembers is the most top-level members (the array's own
// included) a checkpoint holds: a body with more before its array has no
// checkpoint.
const maxResumeMembers = 8

// checkpoint is one resume point (see above). k is 0 in an empty slot.
type checkpoint struct {
	h       xxh3.Uint128 // the seeded hash of body[:k]
	valid   uint64       // resumeContext of the fields and nesting limit it holds for
	count   uint64       // the count context sum was counted in
	sums    resumeSums   // the tallies of the array's elements before k
	k       int32        // the prefix's length, in bytes
	stamp   uint32       // when it was filed (the set's clock): the newest wins
	hits    int32        // elements before k long enough to be cached (CacheStats.Hits)
	nm      uint8        // members in use
	tail    [resumeTailBytes]byte
	members [maxResumeMembers]jsonscan.Member // the top-level members up to the array's
}

// resumeSums are the tallies of an array's elements before a resume
// point. cur is their sum as weighed in a body whose array ends at the
// point; past is their sum as weighed in a body where an element after the
// point changes how they weigh. Only Anthropic messages weigh so: the
// thinking blocks of the current assistant turn count, those of earlier
// turns do not, and a user message after the point that is not only tool
// results makes every assistant message before it an earlier turn's
// (currentTurnStart). For chat and Responses past is cur.
type resumeSums struct{ cur, past tally }

// resumeEntryBytes is the memory of one checkpoint, in bytes.
const resumeEntryBytes = int64(unsafe.Sizeof(checkpoint{}))

// resumeSet is one set of the table, its slots guarded by mu.
type resumeSet struct {
	mu    sync.Mutex
	clock uint32
	ways  [resumeWays]checkpoint
}

// resumeTable holds checkpoints. Safe for concurrent use; a nil table
// holds none.
type resumeTable struct {
	sets []resumeSet
}

// newResumeTable returns a table of at most bytes, in bytes; nil below
// one set.
func newResumeTable(bytes int64) *resumeTable {
	n := bytes / int64(unsafe.Sizeof(resumeSet{}))
	if n < 1 {
		return nil
	}
	return &resumeTable{sets: make([]resumeSet, n)}
}

// bytes is the table's memory, in bytes.
func (t *resumeTable) bytes() int64 {
	if t == nil {
		return 0
	}
	return int64(len(t.sets)) * int64(unsafe.Sizeof(resumeSet{}))
}

// set is the set of the key hash h.
func (t *resumeTable) set(h uint64) *resumeSet {
	i, _ := bits.Mul64(h, uint64(len(t.sets)))
	return &t.sets[i]
}

// resumeContext is what a checkpoint holds for: the fields of the body's
// top level (so the kind) and the nesting limit, under which its prefix
// passed the strict scan and the field check.
func (c *countCache) resumeContext(f *fields, maxDepth int) uint64 {
	var b [24]byte
	copy(b[:], "resume\x00")
	binary.LittleEndian.PutUint64(b[8:], f.id)
	binary.LittleEndian.PutUint64(b[16:], uint64(maxDepth))
	return xxh3.HashSeed(b[:], c.seed)
}

// resumeKey is the set key of a checkpoint of the context valid filed
// under a prefix whose seeded hash (prefixHash) is h.
func resumeKey(valid uint64, h xxh3.Uint128) uint64 {
	return (h.Lo ^ valid) * 0x9e3779b97f4a7c15
}

// resumeState is one request's side of resume points, kept in its
// elemMemo (pooled with it: no allocation per request).
type resumeState struct {
	on      bool       // resume points are used for this request
	valid   uint64     // resumeContext of the request
	resumed bool       // the scan resumed at cp.k
	cp      checkpoint // the checkpoint resumed from
	hasher  *xxh3.Hasher
	seed    uint64 // the hasher's seed
	hashed  int    // bytes of the body written to hasher
	// keys are the set keys of the body's first resumeMinKey<<i bytes,
	// for i below nkeys (those not past the body).
	keys  [resumeKeyLens]uint64
	nkeys int
}

// prefixHash is the seeded hash of the body's first k bytes, continuing
// the pass of an earlier call when k is not below it.
func (m *elemMemo) prefixHash(k int) xxh3.Uint128 {
	r := &m.resume
	if r.hasher == nil {
		r.hasher, r.seed = xxh3.NewSeed(m.cache.seed), m.cache.seed
	} else if r.seed != m.cache.seed {
		r.hasher.ResetSeed(m.cache.seed)
		r.seed, r.hashed = m.cache.seed, 0
	}
	if k < r.hashed {
		r.hasher.Reset()
		r.hashed = 0
	}
	_, _ = r.hasher.WriteString(m.body[r.hashed:k])
	r.hashed = k
	return r.hasher.Sum128()
}

// resumePoint readies m for resume points of its body read with f, and,
// when look, finds a checkpoint for it (see above) and returns its k, with
// lay's members set to the checkpoint's; 0 when there is none (or not
// look). The prefix hashes that confirm candidates take at most twice
// len(body) bytes.
func (m *elemMemo) resumePoint(f *fields, lay *jsonscan.Layout, look bool) int {
	r := &m.resume
	r.on, r.resumed, r.hashed = true, false, 0
	if r.hasher != nil {
		r.hasher.Reset()
	}
	r.valid = m.cache.resumeContext(f, m.maxDepth)
	t := m.cache.resume.Load()
	if t == nil {
		return 0
	}
	// The keys, in one pass of the hash that confirms candidates.
	body := m.body
	r.nkeys = 0
	for n := resumeMinKey; n <= len(body) && r.nkeys < resumeKeyLens; n *= 2 {
		r.keys[r.nkeys] = resumeKey(r.valid, m.prefixHash(n))
		r.nkeys++
	}
	if !look {
		return 0
	}
	budget := 2 * len(body) // bytes the confirming hashes may take
	for i := r.nkeys - 1; i >= 0; i-- {
		n := resumeMinKey << i
		s := t.set(r.keys[i])
		for older := ^uint32(0); ; {
			// The newest candidate of the set not yet tried whose tail
			// fits and whose k lies within the body, copied out under the
			// lock.
			s.mu.Lock()
			best := -1
			for i := range s.ways {
				cp := &s.ways[i]
				if cp.k < int32(n) || int(cp.k) > len(body) || cp.valid != r.valid || cp.stamp >= older ||
					string(cp.tail[:]) != body[int(cp.k)-resumeTailBytes:cp.k] {
					continue
				}
				if best < 0 || cp.stamp > s.ways[best].stamp {
					best = i
				}
			}
			if best >= 0 {
				r.cp = s.ways[best]
			}
			s.mu.Unlock()
			if best < 0 {
				break
			}
			older = r.cp.stamp
			cost := int(r.cp.k) // bytes to hash: from the start, or on from the last pass
			if cost >= r.hashed {
				cost -= r.hashed
			}
			if budget < cost {
				return 0
			}
			budget -= cost
			if m.prefixHash(int(r.cp.k)) == r.cp.h {
				r.resumed = true
				m.cache.resumes.Add(1)
				lay.Members = append(lay.Members[:0], r.cp.members[:r.cp.nm]...)
				return int(r.cp.k)
			}
		}
	}
	return 0
}

// resumedSum is what the checkpoint a request resumed from counted before
// its k (resumeSums.cur, the text tokens and the flags), when it was
// counted in the count context count; ok is false when the request resumed
// from counts made in another context (another model or encoding named
// after the array): the request must then be weighed again from the start.
// A request that did not resume has a zero sum.
func (m *elemMemo) resumedSum(count uint64) (t tally, ok bool) {
	s, ok := m.resumedSums(count)
	return tally{text: s.cur.text, hidden: s.cur.hidden, audio: s.cur.audio}, ok
}

// resumedSums is resumedSum with both of the checkpoint's tallies, whole.
func (m *elemMemo) resumedSums(count uint64) (s resumeSums, ok bool) {
	if m == nil || !m.resume.resumed {
		return resumeSums{}, true
	}
	cp := &m.resume.cp
	if cp.count != count {
		return resumeSums{}, false
	}
	m.cache.hits.Add(uint64(cp.hits))
	return cp.sums, true
}

// resuming reports whether the request may file a checkpoint (it looked
// for one): whether keepResumePoint needs its sums.
func (m *elemMemo) resuming() bool { return m != nil && m.resume.on }

// keepResumePoint files the checkpoint of m's body (read with the fields
// its resumePoint was given) just after the last element of the array
// lay.Members[at]: s are the tallies of all of that array's elements,
// counted in the count context count. Nothing is filed when the request
// did not look for a checkpoint, when the layout is incomplete, or when
// the prefix is shorter than the shortest key. A member before the array
// that has elements is kept Unlaid (the checkpoint does not hold its
// elements: a resumed request's readers find them with gjson).
func (m *elemMemo) keepResumePoint(lay *jsonscan.Layout, at int, s resumeSums, count uint64) {
	if m == nil || !m.resume.on || lay.Dropped || at >= maxResumeMembers || at >= len(lay.Members) {
		return
	}
	tab := m.cache.resume.Load()
	if tab == nil {
		return
	}
	arr := lay.Members[at]
	if arr.Last <= arr.First {
		return // no element after a resumed k (its checkpoint stands), or none at all
	}
	k := int(lay.Elems[arr.Last-1].End)
	if m.body[k-1] != '}' {
		return // not an object: jsonscan resumes after none but closed values, and messages are objects
	}
	r := &m.resume
	key := -1 // the longest key not past k
	for key+1 < r.nkeys && resumeMinKey<<(key+1) <= k {
		key++
	}
	if key < 0 {
		return
	}
	hits := int32(0)
	if r.resumed {
		hits = r.cp.hits
	}
	for _, e := range lay.Elems[arr.First:arr.Last] {
		if e.End-e.Start >= minCachedBytes {
			hits++
		}
	}
	h := m.prefixHash(k)
	set := tab.set(r.keys[key])
	set.mu.Lock()
	// The slot: the one this request resumed from (its prefix is this
	// one's), or one of the same prefix (counted for another model), else
	// the oldest.
	slot := 0
	for i := range set.ways {
		w := &set.ways[i]
		if w.valid == r.valid && (r.resumed && w.k == r.cp.k && w.h == r.cp.h || w.k == int32(k) && w.h == h) {
			slot = i
			break
		}
		if w.stamp < set.ways[slot].stamp {
			slot = i
		}
	}
	set.clock++
	cp := &set.ways[slot]
	*cp = checkpoint{h: h, valid: r.valid, count: count, sums: s, k: int32(k), stamp: set.clock, hits: hits, nm: uint8(at + 1)}
	copy(cp.tail[:], m.body[k-resumeTailBytes:k])
	copy(cp.members[:], lay.Members[:at+1])
	for i := range cp.members[:at] {
		// No element of the layout is kept: a list's are found with gjson.
		mb := &cp.members[i]
		mb.Unlaid = mb.Unlaid || mb.Last > mb.First
		mb.First, mb.Last = 0, 0
	}
	cp.members[at].Value.End, cp.members[at].First, cp.members[at].Last = 0, 0, 0
	set.mu.Unlock()
}
