package keystore

import (
	"crypto/sha256"
	"testing"
)

func lookup(c *Cache, secret string) (string, bool) {
	k, ok := c.LookupKey(sha256.Sum256([]byte(secret)))
	return k.Principal.User, ok
}

// The cache keeps, per key, the record of the highest revision, whichever
// path (notification or whole read) brings it and in whatever order.
func TestCacheKeepsTheNewestRecord(t *testing.T) {
	c := NewCache()
	r1 := testRecord("sk-1", 1)
	r1b := r1
	r1b.User, r1b.Rev = "renamed", 5
	if !c.Apply(r1b) || c.Apply(r1) {
		t.Fatal("step 1 (a notification older than the cached record): applied")
	}
	if u, _ := lookup(c, "sk-1"); u != "renamed" {
		t.Errorf("step 1: user %q", u)
	}

	// step 2: a whole read that started before rev 5 (sees rev 1) keeps 5.
	changed, removed := c.Replace(Snapshot{Records: []Record{r1}, Rev: 4})
	if u, _ := lookup(c, "sk-1"); u != "renamed" || changed != 0 || removed != 0 {
		t.Errorf("step 2 (stale read): user %q, changed %d, removed %d", u, changed, removed)
	}

	// step 3: a key created (rev 7) after a read began (rev 6) and notified
	// first survives the read that missed it.
	r2 := testRecord("sk-2", 7)
	c.Apply(r2)
	c.Replace(Snapshot{Records: []Record{r1b}, Rev: 6})
	if _, ok := lookup(c, "sk-2"); !ok {
		t.Error("step 3: a key newer than the read was dropped")
	}

	// step 4: a read at rev 9 without sk-2 removes it (it left the registry).
	_, removed = c.Replace(Snapshot{Records: []Record{r1b}, Rev: 9})
	if _, ok := lookup(c, "sk-2"); ok || removed != 1 {
		t.Errorf("step 4: a key the registry no longer has is kept (removed %d)", removed)
	}

	// step 5: a newer record from a read replaces the cached one.
	r1c := r1b
	r1c.User, r1c.Rev = "third", 10
	if changed, _ := c.Replace(Snapshot{Records: []Record{r1c}, Rev: 10}); changed != 1 {
		t.Errorf("step 5: changed %d", changed)
	}
	if u, _ := lookup(c, "sk-1"); u != "third" {
		t.Errorf("step 5: user %q", u)
	}
	if a, e, r := c.Counts(t0); a != 1 || e != 0 || r != 0 {
		t.Errorf("counts %d %d %d", a, e, r)
	}
}

func BenchmarkCacheLookup(b *testing.B) {
	c := NewCache()
	for i := range 10000 {
		c.Apply(testRecord("sk-"+string(rune(i)), 1))
	}
	sum := sha256.Sum256([]byte("sk-" + string(rune(77))))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.LookupKey(sum); !ok {
			b.Fatal("missing")
		}
	}
}

// A whole read that began after a record was applied is the truth for
// that key, whatever Rev the cache holds: a forged notification with a
// huge Rev used to un-revoke a key on a node for good (every later read
// and notification lost to it), and a registry Redis that restarted empty
// (revisions from 1 again) left every node serving keys no longer stored,
// which no admin call could then revoke.
func TestCacheReadAfterApplyIsTheTruth(t *testing.T) {
	c := NewCache()
	revoked := testRecord("sk-1", 3)
	revoked.RevokedAt = t0
	c.Replace(Snapshot{Records: []Record{revoked}, Rev: 3, Since: c.Mark()})

	forged := testRecord("sk-1", 1<<62) // not revoked
	if !c.Apply(forged) {
		t.Fatal("the forged record was not applied (the test's premise)")
	}
	gone := testRecord("sk-2", 1<<61) // a key the registry lost
	c.Apply(gone)

	// A read that began before the Apply may predate it: kept.
	before := c.Mark() - 2
	c.Replace(Snapshot{Records: []Record{revoked}, Rev: 3, Since: before})
	if k, _ := c.LookupKey(mustSum(&forged)); k.Revoked {
		t.Fatal("a read older than the notification overrode it")
	}

	// A read that began after it shows the registry: revoked, sk-2 gone.
	c.Replace(Snapshot{Records: []Record{revoked}, Rev: 3, Since: c.Mark()})
	if k, ok := c.LookupKey(mustSum(&forged)); !ok || !k.Revoked {
		t.Errorf("after a later read: revoked %v (found %v), want the registry's revoked record", k.Revoked, ok)
	}
	if _, ok := lookup(c, "sk-2"); ok {
		t.Error("a key the registry no longer holds is still served after a later read")
	}
	// And the registry's own changes apply again.
	again := revoked
	again.Rev = 4
	if !c.Apply(again) {
		t.Error("a registry change after the read was refused as stale")
	}
}
