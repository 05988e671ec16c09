package weigher

import (
	"encoding/binary"
	"math"
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
// resume point remembers, for a prefix body[:k] that ends just after an
// element of a top-level array (chat's and Anthropic's "messages",
// Responses' "input"), what weighing it left: the top-level members before
// that array (their spans, for the layout and the duplicate-key check; a
// list among them is kept Unlaid), and the sums of the array's element
// counts up to k (with the count context they were counted in). A body
// that starts with the same k bytes is scanned from k on
// (jsonscan.Options.Resume), its field check and its counting see only
// the elements after k, and the remembered sum stands for the rest: the
// estimate is the one a full weighing gives (TestResumeSameEstimates,
// TestResumeMessagesGrowing, FuzzResumeChat, FuzzResumeMessages), for a
// hash pass over body[:k] in place of the per-element work.
//
// What an element weighs must not depend on what follows k. For chat and
// Responses it does not. An Anthropic message does, on a model that drops
// earlier turns' thinking (keepsEveryThinking false, and no clear_thinking
// edit; on the others every turn's counts, in one context): the thinking
// blocks of the current assistant turn count and those of earlier turns
// do not (currentTurnStart), so a user message after k that is not only tool
// results makes every assistant message before k an earlier turn's. A
// point therefore keeps two sums (resumeSums): cur, as weighed when the
// array ends at k, and past, with every message before k an earlier
// turn's; a resumed body takes past when an element after k ends the turn
// and cur otherwise. Nothing else in the weighing of a message depends on
// its place (the system prompt, tools and thinking settings are weighed
// apart, on every request).
//
// A body's checkpoint holds up to resumePoints points: the ends of its
// last, second last and fourth last elements (resumeBack), so that a body
// whose last elements were rewritten (a prompt-caching breakpoint moved)
// resumes at the point before them.
//
// Finding one: checkpoints are filed in a set-associative table under the
// key of the body's first n bytes (n the longest of 64, 128, 256… 64 KiB
// not past the last point's k, and again under the first point's when
// that is another n; the key is the seeded hash of the 64 bytes before n,
// resumeKey), resumeWays a set, the newest replacing the oldest. A lookup
// takes the keys of the body's first 64, 128, 256… bytes (to the longest
// not past the body), tries those sets longest first, takes the newest
// candidate with a point whose last resumeTailBytes bytes before its k are
// the body's there, and confirms its longest point that fits with the
// hash of body[:k], or, when that differs, the shorter ones shortest
// first in one pass. The same pass, continued to the new points, files
// the body's own checkpoint.
//
// Why a hash match is the same prefix: the hash is xxh3's 128-bit hash,
// seeded with the count cache's secret seed (drawn from crypto/rand at
// start-up, never shown), of exactly k bytes (after a fixed pad when k
// is at most maxPaddedPrefix: prefixHashOf in the tests); the context (kind, fields,
// nesting limit) and k are compared apart. A caller who does not know the
// seed cannot aim two different prefixes at one hash: each comparison of
// two different prefixes matches by a chance of about 2⁻¹²⁸, so with 2⁴⁰
// requests each tried against a few candidates the chance of any false
// match stays below 2⁻⁸⁵ — the argument, and the hash, of the count cache
// (cacheKey), whose false hit would cost the same wrong count.
//
// Memory: the table is made once per cache size, 1/resumeShare of
// Options.CacheBytes (2 MiB of the default 32 MiB: 2,992 checkpoints of
// resumeEntryBytes, 696, of which 160 hold the tail: 3,880 without it); filing a checkpoint copies it into a slot and
// never allocates, so callers sending many prefixes only evict.

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

// resumePoints is how many points a checkpoint holds: the ends of its
// array's last element, of the one before, and of the fourth last
// (resumeBack). A body whose last messages differ from the previous
// body's resumes at the last point before them: agents that move
// Anthropic's prompt-caching breakpoint (cache_control) to the last block
// of the last message at each request rewrite the previous last message
// (the point before it holds), and those that mark the last two user
// messages rewrite the third last element, a user message (the point
// before it, the end of the fourth last, holds).
const resumePoints = 3

// resumeBack are the elements whose ends a checkpoint's points are, by
// how many elements each lies before the last, shortest prefix first.
var resumeBack = [resumePoints]int{3, 1, 0}

// resumeRing is how many of the last elements' sums a resumeRun keeps:
// resumeBack[0]+1.
const resumeRing = 4

// checkpoint is one body's resume points (see above). np is 0 in an empty
// slot.
type checkpoint struct {
	valid   uint64 // resumeContext of the fields and nesting limit it holds for
	count   uint64 // the count context the sums were counted in
	stamp   uint32 // when it was filed (the set's clock): the newest wins
	np      uint8  // points in use, points[:np], k ascending
	nm      uint8  // members in use
	points  [resumePoints]point
	members [maxResumeMembers]jsonscan.Member // the top-level members up to the array's
	tail    resumeTail                        // what followed the array (chat's only)
}

// Tails. A chat body's members after "messages" (`,"tools":[…],
// "max_tokens":256}`) are the same bytes from one request of an agent to
// the next, at the same distance from the body's end; the scan stepped
// over the tools list by its end hint and a lookup of its hash, and
// scanned the rest, and the field check walked each member again. A
// checkpoint also keeps the tail of the body that filed it: its length,
// its seeded hash (the count cache's key hash: cacheKey's argument holds)
// and its members. A body that resumes from the checkpoint and whose
// bytes after its array are that tail, by length and hash, has them
// vouched (jsonscan.KnownTail): the scan records their members and
// stops, comparing no top-level key (the keys before the array and the
// tail's are those of the body that filed the checkpoint, which passed
// the duplicate-key check: every point of a checkpoint is a prefix of
// the body that filed it, and the members before the array lie before
// its first point), and chat's walk reads them without checking them
// again (their checks passed in a chat body, at the same place after a
// prefix that is the same bytes: the checkpoint's context holds the
// fields). The estimate is a full weighing's (TestTailSameEstimates,
// FuzzResumeChat).

// maxTailMembers is the most members a checkpoint's tail holds: a body
// with more after its array keeps none.
const maxTailMembers = 6

// resumeTail is the tail of a checkpoint's body (see above). nm is 0 when
// none is kept.
type resumeTail struct {
	h  xxh3.Uint128 // the seeded hash of its bytes
	n  int32        // its length, in bytes
	nm uint8        // members in use
	// members are each member's key start and end, value start and end,
	// relative to the tail's start.
	members [maxTailMembers][4]int32
	// tools is what its "tools" list counted, in the count context
	// toolsCtx (toolsSet: it holds one).
	tools    tally
	toolsCtx uint64
	toolsSet bool
}

// tailKeep is what keepResumePoint keeps of the body's tail. The zero
// value keeps none.
type tailKeep struct {
	// on: the checkpoint holds the tail (chat's).
	on bool
	// tools is what the body's "tools" list counted, in the count context
	// ctx, when the list is a member of the tail (toolsSet).
	tools    tally
	ctx      uint64
	toolsSet bool
}

// point is one resume point of a checkpoint: the end of one element of
// its array.
type point struct {
	h    xxh3.Uint128 // the seeded hash of body[:k]
	sums resumeSums   // the tallies of the array's elements before k
	k    int32        // the prefix's length, in bytes
	hits int32        // elements before k long enough to be cached (CacheStats.Hits)
	tail [resumeTailBytes]byte
}

// resumeSums are the tallies of an array's elements before a resume
// point. cur is their sum as weighed in a body whose array ends at the
// point; past is their sum as weighed in a body where an element after the
// point changes how they weigh. Only Anthropic messages weigh so: the
// thinking blocks of the current assistant turn count, those of earlier
// turns do not, and a user message after the point that is not only tool
// results makes every assistant message before it an earlier turn's
// (currentTurnStart). For chat and Responses past is cur.
//
// noCur: cur is not known, for a point before the last element of its
// body when an element after it ended the current turn (the body did not
// weigh the messages before it as the current turn's); a body may resume
// there only when an element after the point ends the turn again.
type resumeSums struct {
	cur, past tally
	noCur     bool
}

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
// under the body's first n bytes: the seeded hash (the count cache's seed,
// and n) of their last resumeMinKey bytes, its window. A key picks a set
// and nothing more (a candidate is confirmed by the hash of its whole
// prefix), so it need not read the whole prefix: a window at each length
// tells apart conversations that share their first bytes once their own
// text reaches it, as a hash of the whole prefix did, for about 60
// instructions a length where a pass of the confirming hash with a sum at
// every length cost about 700 (copying the body through the hasher's
// buffer). Conversations that differ only before a window share its set,
// as bodies of one conversation do.
func (m *elemMemo) resumeKey(valid uint64, n int) uint64 {
	return (xxh3.HashStringSeed(m.body[n-resumeMinKey:n], m.cache.seed^uint64(n)) ^ valid) * 0x9e3779b97f4a7c15
}

// resumeState is one request's side of resume points, kept in its
// elemMemo (pooled with it: no allocation per request).
type resumeState struct {
	on      bool         // resume points are used for this request
	valid   uint64       // resumeContext of the request
	resumed bool         // the scan resumed at cp.points[pt].k
	cp      checkpoint   // the checkpoint resumed from
	pt      int          // the point of cp resumed at
	hasher  *xxh3.Hasher // the pass of prefixes over maxPaddedPrefix
	seed    uint64       // the hasher's seed
	hashed  int          // bytes of the body written to hasher
	// short is the pass of prefixes of at most maxPaddedPrefix, after the
	// pad: started from base (nil: not started), it holds shortHashed
	// bytes of the body.
	short, base *xxh3.Hasher
	shortHashed int
	// keys are the set keys of the body's first resumeMinKey<<i bytes,
	// for i below nkeys (those not past the body), each made when first
	// asked for (key): keys[i] holds it when made has bit i.
	keys  [resumeKeyLens]uint64
	nkeys int
	made  uint16
	// probe is the hint hash of the body's last resumeMinKey bytes
	// (probeHash; 0: none made): keepResumePoint writes there the key
	// its checkpoint is filed under. probes counts the sets the lookup
	// looked in (for tests).
	probe  uint64
	probes int
}

// forget readies r for the memo's next request (elemMemo.done): no resume
// point in use, nothing resumed, no pass under way; the hashers and their
// seed are kept. The rest (the checkpoint resumed from, the keys) is read
// only while resumed (or made afresh by resumePoint, which every request
// that looks for a point calls first), so it is left as it is: clearing
// the whole state, its 696-byte checkpoint included, cost about 190
// instructions a request (TestForgetLeavesNoResume).
func (r *resumeState) forget() {
	r.on, r.resumed, r.base, r.hashed, r.shortHashed = false, false, nil, 0, 0
	r.nkeys, r.made, r.probe, r.probes = 0, 0, 0, 0
}

// key is the set key of the body's first resumeMinKey<<i bytes (i below
// resume.nkeys), made once a request.
func (m *elemMemo) key(i int) uint64 {
	r := &m.resume
	if r.made&(1<<i) == 0 {
		r.keys[i] = m.resumeKey(r.valid, resumeMinKey<<i)
		r.made |= 1 << i
	}
	return r.keys[i]
}

// prefixHash is the prefix hash (prefixHashOf, in the tests, makes it afresh) of the body's first k
// bytes, continuing the pass of an earlier call when k is not below it
// (each of the two kinds of prefix hash has its own pass).
func (m *elemMemo) prefixHash(k int) xxh3.Uint128 {
	r := &m.resume
	if k <= maxPaddedPrefix {
		if r.short == nil {
			r.short = new(xxh3.Hasher)
		}
		if r.base != m.cache.prefixBase || k < r.shortHashed {
			*r.short = *m.cache.prefixBase
			r.base, r.shortHashed = m.cache.prefixBase, 0
		}
		_, _ = r.short.WriteString(m.body[r.shortHashed:k])
		r.shortHashed = k
		return r.short.Sum128()
	}
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

// hashedBefore is how many bytes of the body the pass that hashes its
// first k bytes has hashed (prefixHash).
func (r *resumeState) hashedBefore(k int) int {
	if k <= maxPaddedPrefix {
		return r.shortHashed
	}
	return r.hashed
}

// Probe hints. The lookup looks in the sets of the body's keys longest
// first, and a growing conversation's checkpoint lies under the longest
// key not past its array's end, short of the body's end by what follows
// the array (a chat body's tools and parameters): at 1 KiB the two or
// three longer sets were looked in for nothing, each a key hash and a
// locked look at four checkpoints (some 280 instructions). An agent's
// bodies end with the same bytes from one request to the next; a probe
// hint, keyed by the body's last resumeMinKey bytes and the resume
// context, in the end hints' table (hints.go, under a hash of its own
// seed), names the key the last checkpoint filed by a body ending so
// went under, and the lookup looks there first, then in the others,
// longest first, as before. A hint only orders the sets: every candidate
// is confirmed by the hash of its whole prefix as before
// (TestProbeHintNearMissSameEstimates), so a wrong or stale hint costs
// one look, nothing more.

// probeHint is the index of the key the probe hint of m's body names;
// -1 when there is none (or it names no key of the body). It makes the
// hint hash, for keepResumePoint to write.
func (m *elemMemo) probeHint() int {
	r := &m.resume
	r.probe = 0
	if m.hints == nil || r.nkeys == 0 {
		return -1
	}
	r.probe = m.cache.probeHash(r.valid, m.body[len(m.body)-resumeMinKey:])
	i := m.hints.get(r.probe) - 1
	if i < 0 || i >= r.nkeys {
		return -1
	}
	return i
}

// probeHash is the hint hash of a body whose last resumeMinKey bytes are
// end, in the resume context valid: seeded apart from the end hints'
// (hintHash), whose keys are the first hintPrefix bytes of an element.
func (c *countCache) probeHash(valid uint64, end string) uint64 {
	return xxh3.HashStringSeed(end, c.seed^valid^0x70726f6265) // "probe"
}

// xxh3's Hasher holds up to maxPaddedPrefix bytes (a 1,024-byte block and
// a 64-byte stripe) before it processes its first block; until then its
// Sum128 hashes them with xxh3.Hash128Seed, which derives the secret from
// the seed again (about 200 instructions) and hashes them all again, at
// every call. A prefix that short is hashed after prefixPad fixed bytes
// (zeros), so that the hasher has processed a block before it: the state
// after the pad (countCache.prefixBase, made once per seed) holds the
// derived secret, and each Sum128 hashes the bytes after the last block
// with it. A longer prefix is hashed alone (a pad would cost it the
// Hasher's copy-free path for long writes).
const (
	maxPaddedPrefix = 1<<10 + 64
	prefixPad       = maxPaddedPrefix + 1
)

// newPrefixBase returns a Hasher seeded with seed past prefixPad zero
// bytes: where every padded prefix hash of a cache with that seed starts.
func newPrefixBase(seed uint64) *xxh3.Hasher {
	h := xxh3.NewSeed(seed)
	_, _ = h.Write(make([]byte, prefixPad))
	return h
}

// resumePoint readies m for resume points of its body read with f, and,
// when look, finds a checkpoint for it (see above) and returns its k, with
// lay's members set to the checkpoint's; 0 when there is none (or not
// look). The prefix hashes that confirm candidates take at most twice
// len(body) bytes.
func (m *elemMemo) resumePoint(f *fields, lay *jsonscan.Layout, look bool) int {
	r := &m.resume
	r.on, r.resumed, r.hashed, r.base = true, false, 0, nil
	if r.hasher != nil {
		r.hasher.Reset()
	}
	r.valid = m.context(ctxResume, f, 0)
	t := m.cache.resume.Load()
	if t == nil {
		return 0
	}
	// The keys (their windows; the confirming hash starts with the
	// first candidate's prefix, in one write), each made when first
	// asked for (key): a lookup that finds its checkpoint in the longest
	// set, and a body filing its own, ask for two or three of up to
	// eleven.
	body := m.body
	r.nkeys, r.made = 0, 0
	for n := resumeMinKey; n <= len(body) && r.nkeys < resumeKeyLens; n *= 2 {
		r.nkeys++
	}
	if !look {
		return 0
	}
	// The sets, longest key first, after the one the probe hint names
	// (probeHint): a body grown from the last files its checkpoint under
	// the longest key not past its array's end, which the longer keys of
	// the next, longer body pass (at 1 KiB a lookup looked in three sets
	// to find it in the third).
	var order [resumeKeyLens]int8
	no := 0
	hinted := m.probeHint()
	if hinted >= 0 {
		order[no], no = int8(hinted), no+1
	}
	for i := r.nkeys - 1; i >= 0; i-- {
		if i != hinted {
			order[no], no = int8(i), no+1
		}
	}
	budget := 2 * len(body) // bytes the confirming hashes may take
	for _, i := range order[:no] {
		r.probes++
		s := t.set(m.key(int(i)))
		for older := ^uint32(0); ; {
			// The newest candidate of the set not yet tried with a point
			// whose tail fits and whose k lies within the body, copied
			// out under the lock.
			s.mu.Lock()
			best := -1
			for i := range s.ways {
				cp := &s.ways[i]
				if cp.np == 0 || cp.valid != r.valid || cp.stamp >= older || best >= 0 && cp.stamp <= s.ways[best].stamp {
					continue
				}
				for j := range cp.points[:cp.np] { // by index: a point is 96 bytes
					if cp.points[j].fits(body) {
						best = i
						break
					}
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
			// Its longest point that fits is tried first: a body that
			// grew from the one that filed the checkpoint is confirmed
			// with one hash, where confirming the points shortest first
			// took a sum at each (below 1 KiB, where the hasher keeps
			// the bytes in its buffer, each sum hashes the prefix
			// again). When it differs, the shorter points are confirmed
			// shortest first, in one pass: the longest confirmed is the
			// point (a prefix that differs, differs in every longer
			// one).
			r.pt = -1
			top := int(r.cp.np) - 1
			for top >= 0 && !r.cp.points[top].fits(body) {
				top--
			}
			if top >= 0 && m.confirm(top, &budget) {
				r.pt = top
			} else if top >= 0 {
				for j := range top {
					if !r.cp.points[j].fits(body) {
						continue
					}
					if !m.confirm(j, &budget) {
						break
					}
					r.pt = j
				}
			}
			if r.pt >= 0 {
				r.resumed = true
				m.cache.resumes.Add(1)
				lay.Members = append(lay.Members[:0], r.cp.members[:r.cp.nm]...)
				return int(r.cp.points[r.pt].k)
			}
			if budget <= 0 {
				return 0
			}
		}
	}
	return 0
}

// confirm reports whether the point j of the checkpoint being tried is a
// prefix of the body by its hash, when the bytes it takes to hash (from
// the start, or on from the last pass) are within *budget, which it
// lowers by them; false when they are not.
func (m *elemMemo) confirm(j int, budget *int) bool {
	r := &m.resume
	pt := &r.cp.points[j]
	cost := int(pt.k)
	if done := r.hashedBefore(cost); cost >= done {
		cost -= done
	}
	if *budget < cost {
		return false
	}
	*budget -= cost
	return m.prefixHash(int(pt.k)) == pt.h
}

// fits reports whether p may be a point of body: its k not past the body,
// and the body's resumeTailBytes before k p's tail. The bytes are compared
// as one array (two 8-byte words inline), where a string comparison
// called memequal: a lookup tries about ten points a warm 1 KiB body
// (TestPointFitsSameAsCompare).
func (p *point) fits(body string) bool {
	k := int(p.k)
	if k > len(body) || k < resumeTailBytes {
		return false
	}
	return *(*[resumeTailBytes]byte)(unsafe.Pointer(unsafe.StringData(body[k-resumeTailBytes:]))) == p.tail
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
	pt := &cp.points[m.resume.pt]
	m.cache.hits.Add(uint64(pt.hits))
	return pt.sums, true
}

// resuming reports whether the request may file a checkpoint (it looked
// for one): whether keepResumePoint needs its sums.
func (m *elemMemo) resuming() bool { return m != nil && m.resume.on }

// resumeRun collects, element by element, the tallies of the array a
// checkpoint is filed for: the running sums, and those after each of the
// last resumePoints elements (the checkpoint's points). Its zero value
// holds no element.
type resumeRun struct {
	sums resumeSums // over the elements so far, the resumed prefix's included
	n    int        // elements added
	// last holds the running sums after element i in last[i%resumeRing]
	// (set: a point may be filed there).
	last [resumeRing]struct {
		sums resumeSums
		set  bool
	}
}

// startRun is the run of an array whose elements before the resume point
// (if any) sum to s.
func startRun(s resumeSums) resumeRun { return resumeRun{sums: s} }

// add adds the next element, weighing cur as the body weighs it and past
// once a later element ends the current turn. endsTurn: the element ends
// the current turn (an Anthropic user message that is not only tool
// results), so the points before it lose their cur.
func (r *resumeRun) add(cur, past tally, endsTurn bool) {
	if endsTurn {
		for i := range r.last {
			r.last[i].sums.noCur = true
		}
	}
	r.sums.cur.add(cur)
	r.sums.past.add(past)
	r.last[r.n%resumeRing].sums, r.last[r.n%resumeRing].set = r.sums, true
	r.n++
}

// only makes r a run of n elements whose sums are s, with a point after
// the last alone (for readers that sum an array's elements in one call).
func (r *resumeRun) only(n int, s resumeSums) {
	*r = resumeRun{sums: s, n: n}
	if n > 0 {
		r.last[(n-1)%resumeRing].sums, r.last[(n-1)%resumeRing].set = s, true
	}
}

// keepResumePoint files the checkpoint of m's body (read with the fields
// its resumePoint was given) with points just after the last elements of
// the array lay.Members[at]: run holds their tallies, counted in the count
// context count. Nothing is filed when the request did not look for a
// checkpoint, when the layout is incomplete or run does not match it, or
// when the prefix is shorter than the shortest key; a point is filed only
// after an object element. A member before the array that has elements is
// kept Unlaid (the checkpoint does not hold its elements: a resumed
// request's readers find them with gjson).
func (m *elemMemo) keepResumePoint(lay *jsonscan.Layout, at int, run *resumeRun, count uint64, tail tailKeep) {
	if m == nil || !m.resume.on || lay.Dropped || at >= maxResumeMembers || at >= len(lay.Members) {
		return
	}
	tab := m.cache.resume.Load()
	if tab == nil {
		return
	}
	arr := lay.Members[at]
	if arr.Last <= arr.First || int(arr.Last-arr.First) != run.n {
		return // no element after a resumed k (its checkpoint stands), none at all, or not run's
	}
	r := &m.resume
	hits := int32(0)
	if r.resumed {
		hits = r.cp.points[r.pt].hits
	}
	// The points: the ends of the last elements, shortest first, after
	// those of the checkpoint resumed from up to its point (prefixes of
	// this body too, their sums those of the prefix alone).
	var cp checkpoint
	var carried [resumePoints]point
	nc := 0
	if r.resumed {
		nc = copy(carried[:], r.cp.points[:r.pt+1])
	}
	for i := arr.First; i < arr.Last; i++ {
		e := lay.Elems[i]
		if e.End-e.Start >= minCachedBytes {
			hits++
		}
		if back := int(arr.Last - 1 - i); back != resumeBack[0] && back != resumeBack[1] && back != resumeBack[2] {
			continue
		}
		last := &run.last[int(i-arr.First)%resumeRing]
		k := int(e.End)
		if !last.set || k < resumeMinKey || m.body[k-1] != '}' {
			continue // not an object: jsonscan resumes after none but closed values, and messages are objects
		}
		pt := &cp.points[cp.np]
		pt.k, pt.sums, pt.hits, pt.h = int32(k), last.sums, hits, m.prefixHash(k)
		copy(pt.tail[:], m.body[k-resumeTailBytes:k])
		cp.np++
	}
	if keep := resumePoints - int(cp.np); nc > 0 && keep > 0 {
		nc = min(nc, keep)
		copy(cp.points[nc:], cp.points[:cp.np])
		copy(cp.points[:nc], carried[int(r.pt+1)-nc:r.pt+1])
		cp.np += uint8(nc)
	}
	if cp.np == 0 {
		return
	}
	// The keys: the longest not past the last point (which tells
	// conversations apart best), and, when it is another, the longest not
	// past the first (which a body that differs from this one after that
	// point shares).
	key, key2 := r.keyAt(int(cp.points[cp.np-1].k)), r.keyAt(int(cp.points[0].k))
	if key2 == key {
		key2 = -1
	}
	if key < 0 {
		return
	}
	cp.valid, cp.count, cp.nm = r.valid, count, uint8(at+1)
	copy(cp.members[:], lay.Members[:at+1])
	for i := range cp.members[:at] {
		// No element of the layout is kept: a list's are found with gjson.
		mb := &cp.members[i]
		mb.Unlaid = mb.Unlaid || mb.Last > mb.First
		mb.First, mb.Last = 0, 0
	}
	cp.members[at].Value.End, cp.members[at].First, cp.members[at].Last = 0, 0, 0
	if tail.on {
		cp.tail = m.tailOf(lay, at)
		if cp.tail.nm > 0 {
			cp.tail.tools, cp.tail.toolsCtx, cp.tail.toolsSet = tail.tools, tail.ctx, tail.toolsSet
		}
	}
	m.file(tab.set(m.key(key)), &cp)
	if key2 >= 0 {
		m.file(tab.set(m.key(key2)), &cp)
	}
	if r.probe != 0 {
		m.hints.put(r.probe, key+1) // the probe hint (see Probe hints)
	}
}

// keyAt is the index in keys of the longest key not past k; -1 when
// none is: the keys are resumeMinKey<<i for i below nkeys, so it is the
// bit length of k/resumeMinKey less one, at most nkeys-1
// (TestKeyAtSameAsLoop).
func (r *resumeState) keyAt(k int) int {
	if k < resumeMinKey {
		return -1
	}
	return min(bits.Len(uint(k/resumeMinKey)), r.nkeys) - 1
}

// file puts cp in set (stamping it with the set's clock).
func (m *elemMemo) file(set *resumeSet, cp *checkpoint) {
	r := &m.resume
	newest := cp.points[cp.np-1]
	set.mu.Lock()
	// The slot: the one this request resumed from (its prefix is this
	// one's), or one whose last point is this one's (counted for another
	// model), else the oldest.
	slot := 0
	for i := range set.ways {
		w := &set.ways[i]
		if w.np > 0 && w.valid == r.valid {
			wl := &w.points[w.np-1]
			if r.resumed && w.stamp == r.cp.stamp && wl.k == r.cp.points[r.cp.np-1].k && wl.h == r.cp.points[r.cp.np-1].h || wl.k == newest.k && wl.h == newest.h {
				slot = i
				break
			}
		}
		if set.ways[i].stamp < set.ways[slot].stamp {
			slot = i
		}
	}
	set.clock++
	cp.stamp = set.clock
	set.ways[slot] = *cp
	set.mu.Unlock()
}

// tailOf is the tail of m's body after the array lay.Members[at] (see
// Tails): none when more than maxTailMembers members follow it, or none.
// The tail a request's scan vouched for is the checkpoint's it resumed
// from, kept without hashing it again.
func (m *elemMemo) tailOf(lay *jsonscan.Layout, at int) (t resumeTail) {
	rest := lay.Members[at+1:]
	start := lay.Members[at].Value.End
	if len(rest) == 0 || len(rest) > maxTailMembers || start <= 0 {
		return t
	}
	if r := &m.resume; r.resumed && lay.Tail == len(rest) {
		return r.cp.tail
	}
	for i, mb := range rest {
		t.members[i] = [4]int32{mb.Key.Start - start, mb.Key.End - start, mb.Value.Start - start, mb.Value.End - start}
	}
	t.h = xxh3.HashString128Seed(m.body[start:], m.cache.seed)
	t.n, t.nm = int32(len(m.body)-int(start)), uint8(len(rest))
	return t
}

// Tail implements jsonscan.KnownTail: the members of the tail of the
// checkpoint the request resumed from, when the body's bytes from at are
// that tail (by length and hash); nil otherwise. The bytes before the
// array are the filing body's too (the request resumed at one of its
// points), as KnownTail requires. A list's member is
// Unlaid: its elements are found with gjson.
func (m *elemMemo) Tail(at int) []jsonscan.Member {
	r := &m.resume
	t := &r.cp.tail
	if !r.resumed || t.nm == 0 || int(t.n) != len(m.body)-at {
		return nil
	}
	if xxh3.HashString128Seed(m.body[at:], m.cache.seed) != t.h {
		return nil
	}
	m.cache.tails.Add(1)
	ms := m.tail[:t.nm]
	for i := range ms {
		p := &t.members[i]
		ms[i] = jsonscan.Member{Key: jsonscan.Span{Start: p[0], End: p[1]}, Value: jsonscan.Span{Start: p[2], End: p[3]}, Unlaid: m.body[at+int(p[2])] == '['}
	}
	return ms
}

// tailTools is what the "tools" list of the tail the request's scan
// vouched for counted, when it was counted in the count context ctx; ok
// false otherwise.
func (m *elemMemo) tailTools(ctx uint64) (t tally, ok bool) {
	if m == nil || !m.resume.resumed {
		return tally{}, false
	}
	tl := &m.resume.cp.tail
	if !tl.toolsSet || tl.toolsCtx != ctx {
		return tally{}, false
	}
	m.cache.hits.Add(1)
	return tl.tools, true
}

// vouchedMembers are the top-level members of d that the request's scan
// took from a resumed chat checkpoint without scanning them, by index:
// those before before (the prefix's, the array's excluded) and those from
// tail on (the tail's). A chat body's walk does not check them again:
// they passed in the body that filed the checkpoint.
func (d doc) vouchedMembers() (before, tail int) {
	if d.lay == nil || d.memo == nil || !d.memo.resume.resumed {
		return 0, math.MaxInt
	}
	return int(d.memo.resume.cp.nm) - 1, len(d.lay.Members) - d.lay.Tail
}
