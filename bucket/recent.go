package bucket

import "github.com/cespare/xxhash/v2"

// recentIDs remembers request ids, each with a mark, in two generations: ids
// go into cur; when cur is window old (or full) it becomes prev and the old
// prev is forgotten. An id is thus remembered for at least window and at
// most twice that, unless the size bound rotates early. Memory is bounded by
// two generations of max ids. Memory keeps one for the ids Reconcile applied
// and one for the take markers of Void. The zero value is empty. Not safe
// for concurrent use: its shard's mutex guards it.
type recentIDs struct {
	cur, prev idTable // a map[idKey]mark each, open-addressed (idtable.go)
	since     int64   // µs: when cur began
	// voidedCur and voidedPrev count the ids marked markVoided in cur and
	// in prev, so that a take's look (lookupForTake) skips a prev that
	// holds no tombstone.
	voidedCur, voidedPrev int
}

// idKey is a request id as a map key that holds its bytes inline, so that
// remembering an id copies nothing to the heap: an id of up to 24 bytes
// (llmguard's own are 24) is kept whole; a longer one as its first 24 bytes
// and its xxhash, of which two ids share the 63 bits kept by chance with a
// probability of about 2^-63. The key has no padding (32 bytes, all of them
// compared), so that the map hashes and compares it as one block of
// memory, where a padded struct is hashed and compared field by field.
type idKey struct {
	b [24]byte
	// tail is len(id) for an id of up to 24 bytes, else the id's xxhash
	// with its top bit set (no length has it).
	tail uint64
}

func keyOf(id string) idKey {
	var k idKey
	copy(k.b[:], id)
	if len(id) <= len(k.b) {
		k.tail = uint64(len(id))
		return k
	}
	k.tail = xxhash.Sum64String(id) | 1<<63
	return k
}

// lookup returns id's key and its mark at now, as get does, and whether
// the id is in cur, for a record of it at the same now (under the same
// lock): one expiry and one key for a read then a write of the same id.
func (r *recentIDs) lookup(id string, now, window int64) (k idKey, m mark, inCur bool) {
	r.expire(now, window)
	k = keyOf(id)
	if m, ok := r.cur.get(&k); ok {
		return k, m, true
	}
	m, _ = r.prev.get(&k)
	return k, m, false
}

// lookupForTake is lookup for a take's marker, whose only use of the mark
// is to find a tombstone (takeMarked): when prev holds no markVoided, an id
// not in cur is not looked for in prev and its mark is markNone (where
// lookup may find markTaken, which a take treats alike). The probe of a
// map that the rest of the request has evicted from the caches costs
// about half a microsecond in the running process (perf20, issue #13).
func (r *recentIDs) lookupForTake(id string, now, window int64) (k idKey, m mark, inCur bool) {
	r.expire(now, window)
	k = keyOf(id)
	if m, ok := r.cur.get(&k); ok {
		return k, m, true
	}
	if r.voidedPrev == 0 {
		return k, markNone, false
	}
	m, _ = r.prev.get(&k)
	return k, m, false
}

// record records k with mark m, as set does, after lookup returned k and
// inCur at the same now with nothing recorded in between: cur is rotated
// only for a key not in it (inCur false), and the key is found or added
// in cur by one walk from its hash (idTable.set).
func (r *recentIDs) record(k idKey, m mark, inCur bool, now int64, max int) {
	if !inCur && r.cur.len() >= max {
		r.rotate(now)
	}
	// The next cur is made (on its first id) the size of the generation
	// before it: a steady flow of ids fills it without growing it step by
	// step.
	old, held := r.cur.set(&k, m, r.prev.len())
	switch {
	case held && old == markVoided && m != markVoided:
		r.voidedCur--
	case (!held || old != markVoided) && m == markVoided:
		r.voidedCur++
	}
}

// seen records id at now and reports whether it was already recorded:
// lookup then, unless recorded, record with markTaken (one expiry, one
// key, one look into cur: Reconcile calls it on every request).
func (r *recentIDs) seen(id string, now, window int64, max int) bool {
	k, m, inCur := r.lookup(id, now, window)
	if m != markNone {
		return true
	}
	r.record(k, markTaken, inCur, now, max)
	return false
}

// expire rotates when cur is window old, and forgets both generations when
// cur is twice that old: every id in cur was recorded less than window after
// since (set expires first), so by then all are older than window. A clock
// that steps back delays both.
func (r *recentIDs) expire(now, window int64) {
	switch {
	case now-r.since >= 2*window:
		r.prev, r.cur, r.since = idTable{}, idTable{}, now
		r.voidedCur, r.voidedPrev = 0, 0
	case now-r.since >= window:
		r.rotate(now)
	}
}

// rotate makes cur prev and begins an empty cur, made when first written
// (record).
func (r *recentIDs) rotate(now int64) {
	r.prev, r.cur, r.since = r.cur, idTable{}, now
	r.voidedPrev, r.voidedCur = r.voidedCur, 0
}

// len is the number of ids remembered.
func (r *recentIDs) len() int { return r.cur.len() + r.prev.len() }
