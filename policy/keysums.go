package policy

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/dchest/siphash"
)

// keySumSlots is the number of slots of a KeySums: credentials whose tags
// fall in one slot evict each other. 1,024 slots of one 64-byte entry
// each (tag, SHA-256, credential length) hold some 64 KiB once full.
const keySumSlots = 1024

// keySumMaxLen is the longest credential a KeySums remembers, in bytes:
// longer ones (token68 allows 4 KiB; keys are 20 to 200 bytes) are
// hashed on every request, so that a slot never saves work for a flood
// of huge credentials only.
const keySumMaxLen = 256

// KeySums remembers the SHA-256 of credentials already presented, so that
// a caller's key is hashed once, not on every request (the key's SHA-256
// is what every key look-up uses: Policy's file keys and a KeySource).
//
// A credential is never kept, in clear or otherwise recoverable: a slot
// holds the credential's 128-bit tag under a 128-bit key drawn from
// crypto/rand when the KeySums is made (SipHash-2-4, a keyed PRF for
// short inputs: Aumasson and Bernstein, "SipHash: a fast short-input
// PRF", 2012; github.com/dchest/siphash), its length and its SHA-256 — which the key store and the config's key
// table hold already. A credential is taken as a remembered one only
// when its length and tag match (compared in constant time), so finding
// another credential's SHA-256 for it means forging that MAC.
//
// It is bounded (keySumSlots slots, about 64 KiB), never allocates on a
// hit, and its mapping (credential → SHA-256) never goes stale: keys
// revoked, rotated or reloaded are still decided by the look-ups after
// it. The zero value is not usable; use NewKeySums. Safe for concurrent
// use (slots are swapped whole, atomically).
type KeySums struct {
	k0, k1 uint64 // the SipHash key, from crypto/rand
	slots  [keySumSlots]atomic.Pointer[keySum]
}

// keySum is one remembered credential: its tag, length and SHA-256.
// Immutable once stored.
type keySum struct {
	tag [16]byte
	n   int
	sum [32]byte
}

// NewKeySums returns an empty KeySums with a fresh random MAC key.
func NewKeySums() *KeySums {
	var k [16]byte
	rand.Read(k[:]) // never fails (crypto/rand, Go 1.24+)
	return &KeySums{k0: binary.LittleEndian.Uint64(k[:8]), k1: binary.LittleEndian.Uint64(k[8:])}
}

// tag is the credential's 128-bit SipHash-2-4 under the KeySums's key.
func (s *KeySums) tag(credential []byte) [16]byte {
	var t [16]byte
	a, b := siphash.Hash128(s.k0, s.k1, credential)
	binary.LittleEndian.PutUint64(t[:8], a)
	binary.LittleEndian.PutUint64(t[8:], b)
	return t
}

// sum returns the SHA-256 of credential: the one held when its slot holds
// the credential's length and tag (held), computed otherwise. tag is the
// credential's tag, for keep (zero for a credential above keySumMaxLen).
func (s *KeySums) sum(credential []byte) (sum [32]byte, held bool, tag [16]byte) {
	if len(credential) > keySumMaxLen {
		return sha256.Sum256(credential), false, tag
	}
	tag = s.tag(credential)
	slot := &s.slots[binary.LittleEndian.Uint32(tag[:4])%keySumSlots]
	if e := slot.Load(); e != nil && e.n == len(credential) && sameTag(&e.tag, &tag) {
		return e.sum, true, tag
	}
	return sha256.Sum256(credential), false, tag
}

// sameTag compares two tags in constant time: both words are read and
// combined whatever they hold (subtle.ConstantTimeCompare's slices cost
// about 120 instructions more a request under callgrind).
func sameTag(a, b *[16]byte) bool {
	d := binary.LittleEndian.Uint64(a[:8]) ^ binary.LittleEndian.Uint64(b[:8]) |
		binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(b[8:])
	return d == 0
}

// keep stores a credential's tag (from Sum), length and SHA-256 in its
// slot, replacing whatever the slot held.
func (s *KeySums) keep(tag [16]byte, n int, sum [32]byte) {
	if n > keySumMaxLen {
		return
	}
	s.slots[binary.LittleEndian.Uint32(tag[:4])%keySumSlots].Store(&keySum{tag: tag, n: n, sum: sum})
}

// AuthenticateSums is AuthenticateBytes with the credential's SHA-256
// taken from sums (nil: computed every time): the same principal and
// status for the same credential, source and instant. A credential that
// identifies a caller (any status but KeyUnknown and KeyMalformed) is
// remembered in sums, so that a flood of unknown credentials cannot evict
// the known ones.
func (p *Policy) AuthenticateSums(credential []byte, sums *KeySums, src KeySource, now time.Time) (Principal, KeyStatus) {
	if sums == nil {
		return p.AuthenticateBytes(credential, src, now)
	}
	if len(credential) == 0 {
		return Principal{}, KeyUnknown
	}
	sum, held, tag := sums.sum(credential)
	pr, st := authenticate(p, credential, sum, src, now)
	if !held && st != KeyUnknown && st != KeyMalformed {
		sums.keep(tag, len(credential), sum)
	}
	return pr, st
}
