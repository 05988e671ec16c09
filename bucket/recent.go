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
	cur, prev map[idKey]mark
	since     int64 // µs: when cur began
}

// idKey is a request id as a map key that holds its bytes inline, so that
// remembering an id copies nothing to the heap: an id of up to 24 bytes
// (llmguard's own are 24) is kept whole; a longer one as its first 24 bytes
// and its 64-bit xxhash, which two ids share by chance with a probability
// of about 2^-64.
type idKey struct {
	b    [24]byte
	n    uint8  // len(id), or 255 for a longer id
	hash uint64 // a longer id's xxhash; 0 otherwise
}

func keyOf(id string) idKey {
	var k idKey
	copy(k.b[:], id)
	if len(id) <= len(k.b) {
		k.n = uint8(len(id))
		return k
	}
	k.n, k.hash = 255, xxhash.Sum64String(id)
	return k
}

// get returns id's mark at now, markNone when it is not remembered.
func (r *recentIDs) get(id string, now, window int64) mark {
	r.expire(now, window)
	k := keyOf(id)
	if m, ok := r.cur[k]; ok {
		return m
	}
	return r.prev[k]
}

// set records id with mark m at now (in cur, where a later mark shadows an
// older one left in prev).
func (r *recentIDs) set(id string, m mark, now, window int64, max int) {
	r.expire(now, window)
	k := keyOf(id)
	if _, ok := r.cur[k]; ok {
		r.cur[k] = m
		return
	}
	if len(r.cur) >= max {
		r.rotate(now)
	}
	if r.cur == nil {
		r.cur = make(map[idKey]mark)
	}
	r.cur[k] = m
}

// seen records id at now and reports whether it was already recorded: get
// then, unless recorded, set with markTaken, in one walk (one expiry, one
// key, one look into cur: Reconcile calls it on every request).
func (r *recentIDs) seen(id string, now, window int64, max int) bool {
	r.expire(now, window)
	k := keyOf(id)
	if m, ok := r.cur[k]; ok {
		if m != markNone {
			return true
		}
		r.cur[k] = markTaken
		return false
	}
	if r.prev[k] != markNone {
		return true
	}
	// As set does for an id not in cur; its expiry, at the same now, would
	// change nothing.
	if len(r.cur) >= max {
		r.rotate(now)
	}
	if r.cur == nil {
		r.cur = make(map[idKey]mark)
	}
	r.cur[k] = markTaken
	return false
}

// expire rotates when cur is window old, and forgets both generations when
// cur is twice that old: every id in cur was recorded less than window after
// since (set expires first), so by then all are older than window. A clock
// that steps back delays both.
func (r *recentIDs) expire(now, window int64) {
	switch {
	case now-r.since >= 2*window:
		r.prev, r.cur, r.since = nil, nil, now
	case now-r.since >= window:
		r.rotate(now)
	}
}

func (r *recentIDs) rotate(now int64) {
	r.prev, r.cur, r.since = r.cur, nil, now
}

// len is the number of ids remembered.
func (r *recentIDs) len() int { return len(r.cur) + len(r.prev) }
