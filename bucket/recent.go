package bucket

import "strings"

// recentIDs remembers the request ids Reconcile has applied, in two
// generations: ids go into cur; when cur is dedupFor old (or full) it becomes
// prev and the old prev is forgotten. An id is thus remembered for at least
// dedupFor and at most twice that, unless the size bound rotates early.
// Memory is bounded by two generations of max ids. The zero value is empty.
// Not safe for concurrent use: its shard's mutex guards it.
type recentIDs struct {
	cur, prev map[string]struct{}
	since     int64 // µs: when cur began
}

// mark records id at now and reports whether it was already recorded.
func (r *recentIDs) mark(id string, now, dedupFor int64, max int) bool {
	r.expire(now, dedupFor)
	if _, ok := r.cur[id]; ok {
		return true
	}
	if _, ok := r.prev[id]; ok {
		return true
	}
	if len(r.cur) >= max {
		r.rotate(now)
	}
	if r.cur == nil {
		r.cur = make(map[string]struct{})
	}
	r.cur[strings.Clone(id)] = struct{}{}
	return false
}

// expire rotates when cur is dedupFor old, and forgets both generations when
// cur is twice that old: every id in cur was marked less than dedupFor after
// since (mark expires first), so by then all are older than dedupFor. A clock
// that steps back delays both.
func (r *recentIDs) expire(now, dedupFor int64) {
	switch {
	case now-r.since >= 2*dedupFor:
		r.prev, r.cur, r.since = nil, nil, now
	case now-r.since >= dedupFor:
		r.rotate(now)
	}
}

func (r *recentIDs) rotate(now int64) {
	r.prev, r.cur, r.since = r.cur, nil, now
}

// len is the number of ids remembered.
func (r *recentIDs) len() int { return len(r.cur) + len(r.prev) }
