package keystore

import (
	"sort"
	"sync"
	"time"

	"github.com/llmguard/llmguard/policy"
)

// Cache is a node's copy of the registry, looked up on every request whose
// credential the config file does not list. It changes only through Apply
// (one notified record) and Replace (a whole read of the registry), and
// keeps, for each key, the record with the highest Rev it has seen, so a
// read that raced a notification never brings an older record back. The
// zero value is not usable; use NewCache. Safe for concurrent use.
type Cache struct {
	mu    sync.RWMutex
	bySum map[[32]byte]*Record
	byID  map[string]*Record
	// seq counts Apply's changes; applied holds, per key id, the seq of
	// the Apply that brought the cached record (none: a whole read did).
	// A whole read that began after that Apply (Snapshot.Since) reflects
	// its change or a later one, so it is the truth for that key: a record
	// the registry does not hold (a forged notification, a registry Redis
	// that restarted empty or from an older copy) does not outlive it.
	seq     uint64
	applied map[string]uint64
}

var _ policy.KeySource = (*Cache)(nil)

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{bySum: map[[32]byte]*Record{}, byID: map[string]*Record{}, applied: map[string]uint64{}}
}

// Mark is the cache's Apply sequence: take it before a whole read of the
// registry begins and pass it as the read's Snapshot.Since.
func (c *Cache) Mark() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.seq
}

// LookupKey finds the key whose SHA-256 is sum (policy.KeySource).
func (c *Cache) LookupKey(sum [32]byte) (policy.StoredKey, bool) {
	c.mu.RLock()
	r, ok := c.bySum[sum]
	c.mu.RUnlock()
	if !ok {
		return policy.StoredKey{}, false
	}
	return r.Stored(), true
}

// Apply takes one record (a notification's): it replaces the cached one
// when its Rev is higher, or when none is cached. It reports whether it
// changed the cache. A malformed record (Record.check) is ignored.
func (c *Cache) Apply(rec Record) bool {
	sum, ok := rec.sum()
	if !ok || rec.check() != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.byID[rec.ID]; ok && cur.Rev >= rec.Rev {
		return false
	}
	if cur, ok := c.byID[rec.ID]; ok && cur.SHA256 != rec.SHA256 {
		delete(c.bySum, mustSum(cur))
	}
	r := rec
	c.byID[rec.ID], c.bySum[sum] = &r, &r
	c.seq++
	c.applied[rec.ID] = c.seq
	return true
}

// Replace makes the cache the registry as s read it. Only a record
// applied after the read began (Apply after s.Since) can be newer than the
// read: such a record is kept over the read's when its Rev is higher, and
// kept when the read lacks it and its Rev is above s.Rev (a key created
// during the read, whose notification came first). Every other cached
// record is replaced by the read's, or dropped when the read lacks it:
// the registry is the truth for what it had time to show, whatever Rev a
// node holds (a registry Redis that restarted empty counts its revisions
// from 1 again; a notification may have been forged). It returns the
// number of keys added or changed, and removed.
func (c *Cache) Replace(s Snapshot) (changed, removed int) {
	byID := make(map[string]*Record, len(s.Records))
	bySum := make(map[[32]byte]*Record, len(s.Records))
	applied := map[string]uint64{}
	c.mu.Lock()
	defer c.mu.Unlock()
	newer := func(id string) bool { return c.applied[id] > s.Since }
	for i := range s.Records {
		rec := s.Records[i]
		sum, ok := rec.sum()
		if !ok {
			continue
		}
		if cur, ok := c.byID[rec.ID]; ok && cur.Rev > rec.Rev && newer(rec.ID) {
			rec = *cur
			sum = mustSum(cur)
			applied[rec.ID] = c.applied[rec.ID]
		} else if !ok || cur.Rev != rec.Rev {
			changed++
		}
		r := rec
		byID[r.ID], bySum[sum] = &r, &r
	}
	for id, cur := range c.byID {
		if _, ok := byID[id]; ok {
			continue
		}
		if cur.Rev > s.Rev && newer(id) {
			byID[id], bySum[mustSum(cur)] = cur, cur
			applied[id] = c.applied[id]
			continue
		}
		removed++
	}
	c.byID, c.bySum, c.applied = byID, bySum, applied
	return changed, removed
}

// Records returns a copy of every cached record, by tenant, user and id.
func (c *Cache) Records() []Record {
	c.mu.RLock()
	out := make([]Record, 0, len(c.byID))
	for _, r := range c.byID {
		out = append(out, *r)
	}
	c.mu.RUnlock()
	SortRecords(out)
	return out
}

// Counts returns how many cached keys are active, expired and revoked at
// instant now.
func (c *Cache) Counts(now time.Time) (active, expired, revoked int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, r := range c.byID {
		switch r.Status(now) {
		case StatusActive:
			active++
		case StatusExpired:
			expired++
		default:
			revoked++
		}
	}
	return active, expired, revoked
}

// SortRecords orders records by tenant, user and id.
func SortRecords(rs []Record) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := &rs[i], &rs[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.User != b.User {
			return a.User < b.User
		}
		return a.ID < b.ID
	})
}

// mustSum is the sum of a record already checked.
func mustSum(r *Record) [32]byte {
	s, _ := r.sum()
	return s
}
