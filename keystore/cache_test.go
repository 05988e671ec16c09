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
