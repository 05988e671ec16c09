package policy

import (
	"crypto/sha256"
	"crypto/subtle"
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// sumMemoSlots is the number of credentials a sumMemo remembers at most
// (direct-mapped: two credentials whose hashes share a slot take turns).
const sumMemoSlots = 4096

// maxMemoCredential is the longest credential a sumMemo remembers, in
// bytes: provider and llmguard keys are 40 to 200 bytes (sk-lg- and 43
// base64url characters; OpenAI sk-proj-… about 164; JWTs a few hundred);
// a longer one is hashed on every request and never copied.
const maxMemoCredential = 512

// sumMemo remembers the SHA-256 of the credentials recently authenticated,
// so that a returning caller's key is not hashed again on every request
// (SHA-256 of a 50-byte key is about 2,600 instructions under callgrind,
// the largest part of identifying a caller).
//
// It memoises a pure function, credential → SHA-256, and nothing else: the
// principal, the key's expiry and its revocation are still looked up by
// that sum, in the policy's keys and the key source, on every request, so
// a key revoked in the store or removed by a reload is refused at once, as
// before. The security of a hit rests on exact equality, not on a hash: a
// slot is found by a 64-bit maphash of the credential under a seed drawn
// at random when the memo is made (an attacker cannot aim at a slot), and
// holds the credential's own bytes, compared whole by sameCredential
// (which takes the same time for every content of the same length, so a
// near miss leaks nothing of the stored key); a
// different credential, whatever slot it falls in, never gets another's
// sum. What it costs: the last sumMemoSlots accepted credentials are held
// in this process's memory in clear (each request already brings its
// credential in clear into the server's buffers; the memo is never logged,
// exported or written anywhere), at most sumMemoSlots ×
// maxMemoCredential bytes, 2 MiB, plus the fixed 32 KiB of slots.
//
// The zero value is not usable; a nil *sumMemo hashes every time. Safe for
// concurrent use without a lock: each slot is an atomic pointer to an
// immutable entry, so readers never wait and a writer replaces a whole
// entry.
type sumMemo struct {
	seed  maphash.Seed
	slots [sumMemoSlots]atomic.Pointer[memoEntry]
}

// memoEntry is one remembered credential and its SHA-256. Never modified
// once stored.
type memoEntry struct {
	credential string
	sum        [32]byte
}

func newSumMemo() *sumMemo { return &sumMemo{seed: maphash.MakeSeed()} }

// sum returns the SHA-256 of credential, and whether it came from the memo
// (it is then the sum of exactly this credential, remembered by remember).
func (m *sumMemo) sum(credential string) (s [32]byte, hit bool) {
	if m != nil && len(credential) <= maxMemoCredential {
		e := m.slot(credential).Load()
		if e != nil && sameCredential(e.credential, credential) {
			return e.sum, true
		}
	}
	return sha256.Sum256([]byte(credential)), false
}

// remember stores credential and its SHA-256 sum (which the caller has
// just computed) in credential's slot, replacing whatever it held. A
// credential longer than maxMemoCredential is not stored. The credential
// is copied: the caller's string may be a view of a buffer reused by the
// next request.
func (m *sumMemo) remember(credential string, sum [32]byte) {
	if m == nil || len(credential) > maxMemoCredential {
		return
	}
	m.slot(credential).Store(&memoEntry{credential: strings.Clone(credential), sum: sum})
}

func (m *sumMemo) slot(credential string) *atomic.Pointer[memoEntry] {
	return &m.slots[maphash.String(m.seed, credential)%sumMemoSlots]
}

// sameCredential reports whether a and b are the same bytes, in a time that
// depends on their lengths only (as crypto/subtle.ConstantTimeCompare,
// without converting the strings to byte slices, which would copy a
// credential longer than 32 bytes to the heap on every request).
func sameCredential(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return subtle.ConstantTimeByteEq(v, 0) == 1
}
