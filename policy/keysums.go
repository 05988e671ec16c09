package policy

import (
	"crypto/sha256"
	"crypto/subtle"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// Hashing the presented credential was most of identify's cost: about
// 2,600 instructions a request for SHA-256 alone (callgrind at a112cdd,
// 1 KiB chat). KeySums remembers the hash of the credentials last
// accepted, so a caller's next request finds it with one seeded hash and
// one constant-time comparison. It keeps the hash, never the identity: the
// file's keys of the policy in use and the key store are still asked on
// every request, so a reload, an expiry or a revocation takes effect at the
// same request as without it.

// keySumBits sizes KeySums: 1<<keySumBits slots.
const keySumBits = 8

// maxKeySumLen is the longest credential KeySums remembers, in bytes;
// a longer one is hashed on every request.
const maxKeySumLen = 256

// KeySums remembers the SHA-256 of up to 1<<keySumBits credentials, in a
// direct-mapped table indexed by a hash seeded at random when it is made
// (so that which credentials share a slot cannot be chosen by a caller).
// An entry holds the credential's bytes, which a lookup compares in
// constant time, and its SHA-256; entries are made only for credentials
// Authenticate accepted and are dropped when the same credential is
// refused, so that the table holds no unknown, revoked or expired
// credential it saw last. Its memory is bounded: at most 1<<keySumBits
// entries of at most maxKeySumLen bytes of credential each (about 80 KiB).
// Make it with NewKeySums; a nil *KeySums remembers nothing. Safe for
// concurrent use.
type KeySums struct {
	seed  maphash.Seed
	slots [1 << keySumBits]atomic.Pointer[keySum]
}

// keySum is one remembered credential and its SHA-256; never changed once
// published.
type keySum struct {
	cred []byte
	sum  [32]byte
}

// NewKeySums returns an empty table with a fresh random seed.
func NewKeySums() *KeySums { return &KeySums{seed: maphash.MakeSeed()} }

// slot is the slot credential maps to.
func (c *KeySums) slot(credential []byte) *atomic.Pointer[keySum] {
	return &c.slots[maphash.Bytes(c.seed, credential)>>(64-keySumBits)]
}

// sum returns the SHA-256 of credential: from the table when its slot
// holds the same bytes, else computed. hit says it came from the table.
func (c *KeySums) sum(credential []byte) (sum [32]byte, hit bool) {
	if c == nil || len(credential) > maxKeySumLen {
		return sha256.Sum256(credential), false
	}
	if e := c.slot(credential).Load(); e != nil && len(e.cred) == len(credential) &&
		subtle.ConstantTimeCompare(e.cred, credential) == 1 {
		return e.sum, true
	}
	return sha256.Sum256(credential), false
}

// keep remembers sum as credential's SHA-256 (a copy of credential is
// kept), replacing its slot's entry.
func (c *KeySums) keep(credential []byte, sum [32]byte) {
	if c == nil || len(credential) > maxKeySumLen {
		return
	}
	c.slot(credential).Store(&keySum{cred: append([]byte(nil), credential...), sum: sum})
}

// forget drops credential's entry, if its slot holds it.
func (c *KeySums) forget(credential []byte) {
	if c == nil || len(credential) > maxKeySumLen {
		return
	}
	s := c.slot(credential)
	if e := s.Load(); e != nil && len(e.cred) == len(credential) && subtle.ConstantTimeCompare(e.cred, credential) == 1 {
		s.CompareAndSwap(e, nil)
	}
}

// Len is the number of credentials remembered (for tests and the memory
// bound: at most 1<<keySumBits).
func (c *KeySums) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			n++
		}
	}
	return n
}

// AuthenticateBytes is Authenticate for a credential given as bytes (the
// header's own, which it does not keep: sums keeps a copy), with the
// SHA-256 of a credential it accepted remembered in sums (nil: none) and
// found there on its next request. Its results are Authenticate's for the
// same credential, source and instant, whatever sums holds.
func (p *Policy) AuthenticateBytes(credential []byte, sums *KeySums, src KeySource, now time.Time) (pr Principal, st KeyStatus) {
	if len(credential) == 0 {
		return Principal{}, KeyUnknown
	}
	sum, hit := sums.sum(credential)
	pr, st = authenticate(p, credential, sum, src, now)
	switch {
	case st != KeyAccepted:
		// Even on a miss: a request accepted just before a revocation
		// may have kept it since.
		sums.forget(credential)
	case !hit:
		sums.keep(credential, sum)
	}
	return pr, st
}
